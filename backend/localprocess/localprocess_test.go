package localprocess_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.New(localprocess.Kind, backend.Config{}))
}

// TestNotIsolating: local_process states in its capabilities that it is
// no security boundary; callers ask that, never its kind name.
func TestNotIsolating(t *testing.T) {
	b, err := backend.New(localprocess.Kind, backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Capabilities().Isolating {
		t.Errorf("%s Capabilities().Isolating = true, want false", b.Kind())
	}
}

// TestRequireLimits: a configuration that requires memory, CPU and
// process limits makes local_process unavailable, and Run refuses
// without starting anything, since it applies none of them.
func TestRequireLimits(t *testing.T) {
	b, err := backend.New(localprocess.Kind, backend.Config{RequireLimits: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Available(context.Background()); err == nil {
		t.Errorf("Available() with RequireLimits = nil, want the reason it cannot apply them")
	}
	spec, out, _ := backendtest.Spec(t, "/bin/echo", "ran")
	o, err := b.Run(context.Background(), spec)
	if got, want := job.CodeOf(err), job.CodeBackendUnavail; got != want {
		t.Errorf("Run with RequireLimits error = %v, want %s", err, want)
	}
	if o.ExitCode != nil || out.String() != "" {
		t.Errorf("Run with RequireLimits ran the command: %+v %q", o, out.String())
	}
}

func TestLifecycle(t *testing.T) {
	backendtest.Lifecycle(t, backendtest.New(localprocess.Kind, backend.Config{}))
}
