package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// probeBackend is an isolating backend whose probe the test controls: it
// fails while failures > 0, counting down once per probe.
type probeBackend struct {
	kind     string
	failures atomic.Int32
	probes   atomic.Int32
}

func (b *probeBackend) Kind() string { return b.kind }
func (b *probeBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Isolating: true}
}

func (b *probeBackend) Available(context.Context) error {
	b.probes.Add(1)
	if b.failures.Add(-1) >= 0 {
		return errors.New("cannot create a user namespace (test)")
	}
	return nil
}

func (b *probeBackend) Run(context.Context, backend.Spec) (backend.Outcome, error) {
	return backend.Outcome{}, errors.New("the gateway runs jobs through its JobRunner, never a backend")
}

var (
	sandboxDown  = &probeBackend{kind: "gateway_test_sandbox_down"}
	sandboxFlaky = &probeBackend{kind: "gateway_test_sandbox_flaky"}
)

func init() {
	sandboxDown.failures.Store(1 << 30)
	backend.Register(sandboxDown)
	backend.Register(sandboxFlaky)
}

// TestSubprocessFailsClosed: when the configured backend cannot start, a
// subprocess tool call fails backend.unavailable with the probe's reason
// and no job runs; it never falls back to local_process. linux_sandbox,
// the default, is not linked into this test binary.
func TestSubprocessFailsClosed(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "crate"), 0o755))
	tests := []struct {
		name   string
		opts   []Option
		reason string
	}{
		{"default linux_sandbox not built in", nil, "not registered"},
		{"configured backend unavailable", []Option{WithBackend(sandboxDown.kind)}, "cannot create a user namespace (test)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fj := &fakeJobs{}
			g := New(testerPolicy(t, dir, ""), nil, fj, append([]Option{WithCwd(dir)}, tt.opts...)...)
			_, err := g.Invoke(context.Background(), "run_tests", json.RawMessage(`{"command":"/bin/true","working_directory":"crate"}`))
			e := job.AsError(err)
			if got, want := e.Code, job.CodeBackendUnavail; got != want {
				t.Fatalf("run_tests code = %q (%v), want %q", got, err, want)
			}
			if got, want := job.StatusFor(e.Code), job.StatusBackendUnavailable; got != want {
				t.Errorf("status = %s, want %s", got, want)
			}
			if got := e.Details["reason"]; got != tt.reason {
				t.Errorf("details.reason = %v, want %q", got, tt.reason)
			}
			if len(fj.runs) != 0 {
				t.Errorf("ran %d jobs (backend %q), want none", len(fj.runs), fj.runs[0].Backend.Kind)
			}
		})
	}
}

// TestBackendFailureNotCached: a probe that fails once and then succeeds
// fails one call and lets the next run on the configured backend.
func TestBackendFailureNotCached(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "crate"), 0o755))
	sandboxFlaky.failures.Store(1)
	fj := &fakeJobs{res: job.Result{Status: job.StatusCompleted, Backend: sandboxFlaky.kind}}
	g := New(testerPolicy(t, dir, ""), nil, fj, WithCwd(dir), WithBackend(sandboxFlaky.kind))
	args := json.RawMessage(`{"command":"/bin/true","working_directory":"crate"}`)
	if _, err := g.Invoke(context.Background(), "run_tests", args); job.CodeOf(err) != job.CodeBackendUnavail {
		t.Fatalf("first call = %v, want %s", err, job.CodeBackendUnavail)
	}
	out, err := g.Invoke(context.Background(), "run_tests", args)
	if err != nil {
		t.Fatalf("second call after the backend recovered = %v, want a job", err)
	}
	var res JobToolResult
	json.Unmarshal(out, &res)
	if got, want := len(fj.runs), 1; got != want {
		t.Fatalf("jobs run = %d, want %d", got, want)
	}
	if got, want := fj.runs[0].Backend.Kind, sandboxFlaky.kind; got != want {
		t.Errorf("job backend = %q, want %q", got, want)
	}
	if strings.Contains(res.BackendNote, BackendLocal) {
		t.Errorf("backend_note = %q, want no local_process note on an isolating backend", res.BackendNote)
	}
	if got, want := sandboxFlaky.probes.Load(), int32(2); got != want {
		t.Errorf("probes = %d, want %d (one per call)", got, want)
	}
}
