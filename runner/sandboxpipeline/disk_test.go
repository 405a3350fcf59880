package sandboxpipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
)

// sandboxRunner is a runner on linux_sandbox that can enforce disk
// limits, or skips t saying why not.
func sandboxRunner(t *testing.T) (*runner.Runner, string) {
	return rootSandboxRunner(t, job.LimitDisk, map[string]string{"input.txt": "input\n"})
}

// rootSandboxRunner is a root runner on linux_sandbox that enforces
// limit, over a workspace holding files, or skips t saying why not.
func rootSandboxRunner(t *testing.T, limit string, files map[string]string) (*runner.Runner, string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("the sandbox pipeline tests run as root (as CI does): a disk limit mounts a tmpfs, an exec allow-list remounts noexec")
	}
	b, err := linuxsandbox.New(backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Available(context.Background()); err != nil {
		t.Skipf("linux_sandbox unavailable on this host: %v", err)
	}
	if !slices.Contains(b.Capabilities().Enforces, limit) {
		t.Skipf("linux_sandbox does not enforce %s here", limit)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: linuxsandbox.Kind, Backends: backend.Set{linuxsandbox.Kind: b}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, ws
}

func shRequest(ws, script string, lim job.Limits) job.Request {
	lim.TimeoutMS = 60_000
	return job.Request{
		Workspace: job.Workspace{Path: ws},
		Command:   job.Command{Argv: []string{"/bin/sh", "-c", script}},
		Policy:    job.Policy{AllowShell: true, AllowedCommands: []job.CommandRule{{Basename: "sh"}}, ArtifactGlobs: []string{"*.txt"}},
		Limits:    lim,
	}
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

func run(t *testing.T, r *runner.Runner, req job.Request) job.Result {
	t.Helper()
	res, err := r.Run(context.Background(), req, runner.Options{Attempt: 1})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// artifact is the content of a collected artifact ("" when missing).
func artifact(r *runner.Runner, res job.Result, name string) string {
	b, _ := os.ReadFile(filepath.Join(r.Store().RunDir(res.JobID), store.ArtifactsDir, name))
	return string(b)
}

// failedWithENOSPC checks a job that hit its disk limit: its own
// non-zero exit, ENOSPC's message, disk enforced, and the artifact it
// wrote before the limit collected.
func failedWithENOSPC(t *testing.T, r *runner.Runner, res job.Result) {
	t.Helper()
	if res.Error == nil || res.Error.Code != job.CodeRunExitNonzero || res.ExitCode == nil || *res.ExitCode == 0 {
		t.Errorf("result = %s %+v exit %v, want the job's own non-zero exit", res.Status, res.Error, res.ExitCode)
	}
	if !strings.Contains(res.Stderr.Text, "No space left on device") {
		t.Errorf("stderr = %q, want ENOSPC's message", res.Stderr.Text)
	}
	if res.Enforcement == nil || !slices.Contains(res.Enforcement.Enforced, job.LimitDisk) {
		t.Errorf("enforcement = %+v, want disk enforced", res.Enforcement)
	}
	if got, want := artifact(r, res, "result.txt"), "before the limit\n"; got != want {
		t.Errorf("artifact result.txt = %q, want %q (artifacts %+v)", got, want, res.Artifacts)
	}
}

// A 1 GiB write under disk_mb 64 fails inside the job with ENOSPC; the
// host's free space does not pay for it; the artifact written first is
// collected; the run's snapshot keeps the workspace as it was before.
func TestDiskLimitedJob(t *testing.T) {
	r, ws := sandboxRunner(t)
	before := freeBytes(t, ws)
	start := time.Now()
	res := run(t, r, shRequest(ws, "echo 'before the limit' > result.txt && dd if=/dev/zero of=big bs=1M count=1024 && echo after > after.txt; rc=$?; ls -l big >&2; exit $rc", job.Limits{DiskMB: 64}))
	elapsed := time.Since(start)
	after := freeBytes(t, ws)
	failedWithENOSPC(t, r, res)
	t.Logf("job took %v (%d ms recorded); stderr %q; host free space dropped %d bytes", elapsed.Round(time.Millisecond), res.DurationMS, res.Stderr.Text, before-after)
	if drop := before - after; drop > 64<<20 {
		t.Errorf("host free space dropped by %d bytes, want at most 64 MiB", drop)
	}
	snap := filepath.Join(r.Store().RunDir(res.JobID), store.SnapshotDir)
	if _, err := os.Stat(filepath.Join(snap, "big")); err == nil {
		t.Error("the job's write reached the on-disk snapshot")
	}
	if got, _ := os.ReadFile(filepath.Join(snap, "input.txt")); string(got) != "input\n" {
		t.Errorf("snapshot input.txt = %q", got)
	}
}

// 20,000 file creations under a small inode cap fail.
func TestDiskInodeLimitedJob(t *testing.T) {
	r, ws := sandboxRunner(t)
	start := time.Now()
	res := run(t, r, shRequest(ws, `echo 'before the limit' > result.txt; i=0; while [ $i -lt 20000 ]; do true > f$i || exit 3; i=$((i+1)); done`,
		job.Limits{DiskMB: 64, DiskInodes: 2000}))
	failedWithENOSPC(t, r, res)
	if res.ExitCode != nil && *res.ExitCode != 3 {
		t.Errorf("exit = %d, want 3 (a creation failed)", *res.ExitCode)
	}
	t.Logf("job took %v", time.Since(start).Round(time.Millisecond))
}

// A job without disk_mb behaves as before: it writes to the on-disk
// snapshot, past what a 64 MiB limit would allow, and disk is not
// mentioned.
func TestNoDiskLimitAsBefore(t *testing.T) {
	r, ws := sandboxRunner(t)
	res := run(t, r, shRequest(ws, "echo 'before the limit' > result.txt && dd if=/dev/zero of=big bs=1M count=80 2>/dev/null", job.Limits{}))
	if res.Status != job.StatusCompleted {
		t.Fatalf("status %s (%+v), stderr %q", res.Status, res.Error, res.Stderr.Text)
	}
	if slices.Contains(res.Enforcement.Enforced, job.LimitDisk) || slices.Contains(res.Enforcement.NotEnforced, job.LimitDisk) {
		t.Errorf("enforcement %+v mentions disk", res.Enforcement)
	}
	if got := artifact(r, res, "result.txt"); got != "before the limit\n" {
		t.Errorf("artifact result.txt = %q", got)
	}
	fi, err := os.Stat(filepath.Join(r.Store().RunDir(res.JobID), store.SnapshotDir, "big"))
	if err != nil || fi.Size() != 80<<20 {
		t.Errorf("snapshot big = %v, %v; want 80 MiB on disk", fi, err)
	}
}
