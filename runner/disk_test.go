package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// diskBackend keeps the job's workspace somewhere of its own, as
// linux_sandbox does under a disk limit: the job "writes" out.txt there,
// and Outcome.Layers and Release hand it to the runner.
type diskBackend struct {
	t        *testing.T
	limits   backend.Limits
	released bool
}

func (b *diskBackend) Kind() string { return "disk_test" }
func (b *diskBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Isolating: true}
}
func (b *diskBackend) Available(context.Context) error { return nil }
func (b *diskBackend) Run(_ context.Context, spec backend.Spec) (backend.Outcome, error) {
	b.limits = spec.Limits
	own := b.t.TempDir()
	if err := os.WriteFile(filepath.Join(own, "out.txt"), []byte("from the backend's disk\n"), 0o644); err != nil {
		return backend.Outcome{}, err
	}
	code := 1
	return backend.Outcome{
		ExitCode: &code, Reason: job.ReasonExit, Enforced: []string{job.LimitDisk},
		Layers:  []string{own},
		Release: func() { b.released = true; os.RemoveAll(own) },
	}, nil
}

// TestDiskLimitPipeline: the runner passes limits.disk_mb and the
// derived disk_inodes to the backend, collects artifacts from the layers
// the backend names, releases them afterwards, and reports the job's own
// non-zero exit with disk enforced.
func TestDiskLimitPipeline(t *testing.T) {
	f := newFixture(t, map[string]string{"out.txt": "the on-disk snapshot\n"})
	b := &diskBackend{t: t}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(t.TempDir(), "store"), DefaultBackend: "disk_test", Backends: backend.Set{"disk_test": b}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	req := f.request([]string{"true"}, "true")
	req.Limits.DiskMB = 64
	req.Policy.ArtifactGlobs = []string{"out.txt"}
	res, err := r.Run(context.Background(), req, runner.Options{Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := code(res), job.CodeRunExitNonzero; got != want {
		t.Errorf("error code = %q, want %q", got, want)
	}
	if got, want := [2]int64{b.limits.DiskBytes, b.limits.DiskInodes}, [2]int64{64 << 20, 64 * 128}; got != want {
		t.Errorf("backend disk limits = %v, want %v", got, want)
	}
	if !b.released {
		t.Error("the backend's workspace was not released")
	}
	if len(res.Artifacts) != 1 {
		t.Fatalf("artifacts = %+v, want out.txt", res.Artifacts)
	}
	got, err := os.ReadFile(filepath.Join(r.Store().RunDir(res.JobID), "artifacts", "out.txt"))
	if err != nil || string(got) != "from the backend's disk\n" {
		t.Errorf("collected out.txt = %q, %v; want the backend's copy", got, err)
	}
	if diff := cmp.Diff([]string{job.LimitDisk}, res.Enforcement.Enforced); diff != "" {
		t.Errorf("enforced (-want +got):\n%s", diff)
	}
}

// local_process records a disk limit it cannot enforce, and a job
// without one sees no mention of disk.
func TestLocalProcessDiskNotEnforced(t *testing.T) {
	f := newFixture(t, nil)
	for _, tt := range []struct {
		diskMB int64
		want   bool
	}{{0, false}, {64, true}} {
		req := f.request([]string{"true"}, "true")
		req.Limits.DiskMB = tt.diskMB
		res := f.run(req)
		if res.Status != job.StatusCompleted {
			t.Fatalf("disk_mb %d: status %s (%v)", tt.diskMB, res.Status, res.Error)
		}
		if got := slices.Contains(res.Enforcement.NotEnforced, job.LimitDisk); got != tt.want {
			t.Errorf("disk_mb %d: disk in not_enforced %q = %v, want %v", tt.diskMB, res.Enforcement.NotEnforced, got, tt.want)
		}
	}
}
