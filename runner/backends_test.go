package runner_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// TestDefaultBackendIsIsolating: a runner configured with no default never
// falls back to local_process. linux_sandbox is not linked into this test
// binary, so a request naming no backend is refused instead of running
// unisolated.
func TestDefaultBackendIsIsolating(t *testing.T) {
	f := newFixture(t, nil)
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Config().DefaultBackend, "linux_sandbox"; got != want {
		t.Errorf("DefaultBackend = %q, want %q", got, want)
	}
	req := f.request([]string{"true"}, "true")
	_, err = r.Run(context.Background(), req, runner.Options{Attempt: 1})
	if got, want := job.CodeOf(err), job.CodeInvalidRequest; got != want {
		t.Errorf("Run with no backend named = %v, want %s (linux_sandbox is not registered here)", err, want)
	}
}

// TestBackendsRefusesOthers: with Config.Backends set, Prepare refuses any
// other kind, and Execute (a job another node queued) ends it
// backend_unavailable without running it.
func TestBackendsRefusesOthers(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "x"})
	dir := t.TempDir()
	fc, err := backend.New("firecracker", backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: "firecracker", Backends: backend.Set{"firecracker": fc}})
	if err != nil {
		t.Fatal(err)
	}
	req := f.request([]string{"true"}, "true")
	req.Backend.Kind = "local_process"
	err = r.Prepare(&req)
	if got, want := job.CodeOf(err), job.CodeInvalidRequest; got != want {
		t.Fatalf("Prepare(local_process) = %v, want %s", err, want)
	}
	req.JobID = "job_queued_elsewhere"
	res := r.Execute(context.Background(), req, runner.Options{Attempt: 1})
	if got, want := res.Status, job.StatusBackendUnavailable; got != want {
		t.Errorf("Execute(local_process) status = %s (%v), want %s", got, res.Error, want)
	}
	if res.ExitCode != nil {
		t.Errorf("Execute(local_process) ran the command: exit %d", *res.ExitCode)
	}

	req = f.request([]string{"true"}, "true")
	if err := r.Prepare(&req); err != nil {
		t.Errorf("Prepare(default firecracker) = %v, want nil", err)
	}
	if got, want := r.Enabled("firecracker"), true; got != want {
		t.Errorf("Enabled(firecracker) = %v, want %v", got, want)
	}
}
