package firecracker

import (
	"context"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// TestUnavailableWithReason: the placeholder never runs anything and
// always says why, with the stable backend.unavailable code.
func TestUnavailableWithReason(t *testing.T) {
	b, err := backend.New(Kind, backend.Config{})
	if err != nil || b.Kind() != Kind {
		t.Fatalf("backend.New(%q) = %v, %v; want the registered placeholder", Kind, b, err)
	}
	if !b.Capabilities().Isolating {
		t.Errorf("Capabilities().Isolating = false; a microVM is a security boundary")
	}
	err = b.Available(context.Background())
	if err == nil || err.Error() == "" {
		t.Fatal("Available() = nil; a backend that cannot run must give a reason")
	}
	out, err := b.Run(context.Background(), backend.Spec{Argv: []string{"/bin/true"}})
	if job.CodeOf(err) != job.CodeBackendUnavail {
		t.Fatalf("Run error = %v, want %s", err, job.CodeBackendUnavail)
	}
	if out.ExitCode != nil || out.Reason != "" {
		t.Errorf("Run reported an outcome %+v; it must never execute", out)
	}
	jerr := job.AsError(err)
	if jerr.Details["backend"] != Kind || !strings.Contains(err.Error(), strings.SplitN(b.Available(context.Background()).Error(), ":", 2)[0]) {
		t.Errorf("error %v details %v; want backend=%s and the availability reason", err, jerr.Details, Kind)
	}
}
