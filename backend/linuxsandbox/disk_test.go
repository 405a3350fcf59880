package linuxsandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/job"
)

// diskSandbox is a backend that enforces disk limits, or skips t.
func diskSandbox(t *testing.T) backend.Backend {
	t.Helper()
	b := sandbox(t)
	backendtest.NeedLimit(t, b, job.LimitDisk) // a root runner
	return b
}

// exitString is how the job ended, for messages.
func exitString(out backend.Outcome) string {
	if out.ExitCode == nil {
		return "signal " + out.Signal
	}
	return strconv.Itoa(*out.ExitCode)
}

// runDisk runs script under lim's disk limit and returns the outcome,
// its stderr and the workspace's path in the outcome's layers (released
// when the test ends).
func runDisk(t *testing.T, b backend.Backend, lim backend.Limits, script string) (backend.Outcome, string, string) {
	t.Helper()
	spec, _, errb := backendtest.Spec(t, "/bin/sh", "-c", script)
	spec.Limits.DiskBytes, spec.Limits.DiskInodes = lim.DiskBytes, lim.DiskInodes
	spec.Limits.MemoryBytes = 1 << 30
	spec.Limits.Timeout = 60 * time.Second
	out, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out.Release == nil || len(out.Layers) != 1 {
		t.Fatalf("Run() = Layers %q, Release set %v; want one layer and a Release", out.Layers, out.Release != nil)
	}
	t.Cleanup(out.Release)
	if !slices.Contains(out.Enforced, job.LimitDisk) {
		t.Errorf("enforced = %q, want %q in it", out.Enforced, job.LimitDisk)
	}
	return out, errb.String(), out.Layers[0]
}

// A 1 GiB write under a 64 MiB disk limit fails with ENOSPC inside the
// job, which sees it and exits non-zero; the host's disk does not pay
// for it; what the job wrote before the limit is still there to collect,
// and the on-disk snapshot keeps its state from before the run.
func TestDiskLimitStopsABigWrite(t *testing.T) {
	b := diskSandbox(t)
	start := time.Now()
	out, stderr, ws := runDisk(t, b, backend.Limits{DiskBytes: 64 << 20},
		"echo result > result.txt && dd if=/dev/zero of=big bs=1M count=1024")
	elapsed := time.Since(start)
	if out.ExitCode == nil || *out.ExitCode == 0 {
		t.Errorf("exit = %s (%s), want the job's own non-zero exit", exitString(out), out.Reason)
	}
	if !strings.Contains(stderr, "No space left on device") {
		t.Errorf("stderr = %q, want ENOSPC's message", stderr)
	}
	fi, err := os.Stat(filepath.Join(ws, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Size(); got > 64<<20 || got < 60<<20 {
		t.Errorf("big holds %d bytes, want just under 64 MiB", got)
	}
	t.Logf("wrote %d bytes before ENOSPC, run took %v", fi.Size(), elapsed.Round(time.Millisecond))
	// The host's disk does not pay: what the job wrote lies on a tmpfs
	// of its own (the host's free space, which every other test running
	// beside this one changes, told nothing reliable).
	var st unix.Statfs_t
	if err := unix.Statfs(ws, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		t.Errorf("the job's workspace is on a filesystem of type %#x, want tmpfs", st.Type)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "result.txt")); err != nil || string(got) != "result\n" {
		t.Errorf("result.txt = %q, %v; want the file written before the limit", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "input.txt")); err != nil || string(got) != "input\n" {
		t.Errorf("the snapshot's input.txt = %q, %v", got, err)
	}
}

// 20,000 file creations under a 1,000 inode cap fail with ENOSPC.
func TestDiskInodeCap(t *testing.T) {
	b := diskSandbox(t)
	start := time.Now()
	out, stderr, ws := runDisk(t, b, backend.Limits{DiskBytes: 64 << 20, DiskInodes: 1000},
		`i=0; while [ $i -lt 20000 ]; do true > f$i || exit 3; i=$((i+1)); done`)
	if out.ExitCode == nil || *out.ExitCode != 3 {
		t.Errorf("exit = %s (%s), want 3 (a creation failed)", exitString(out), out.Reason)
	}
	if !strings.Contains(stderr, "No space left on device") {
		t.Errorf("stderr = %q, want ENOSPC's message", stderr)
	}
	entries, err := os.ReadDir(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d entries before ENOSPC, run took %v", len(entries), time.Since(start).Round(time.Millisecond))
	if len(entries) >= 1000 || len(entries) < 900 {
		t.Errorf("workspace holds %d entries, want just under 1000", len(entries))
	}
}

// A snapshot larger than the disk limit is refused before the job runs.
func TestDiskLimitSmallerThanSnapshot(t *testing.T) {
	b := diskSandbox(t)
	spec, _, _ := backendtest.Spec(t, "/bin/sh", "-c", "echo ran > marker")
	if err := os.WriteFile(filepath.Join(spec.Workspace.Dir, "large"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	spec.Limits.DiskBytes = 1 << 20
	out, err := b.Run(context.Background(), spec)
	if got, want := job.CodeOf(err), job.CodeSnapshotFailed; got != want {
		t.Fatalf("Run() = %+v, %v; want %s", out, err, want)
	}
	if out.Release != nil {
		t.Error("a failed Run handed back a Release")
	}
	if _, err := os.Stat(filepath.Join(spec.Workspace.Dir, "marker")); err == nil {
		t.Error("the job ran")
	}
}

// An overlay snapshot's upper layer is the size-limited one: the job
// reads the shared layer, and its changes stop at the limit.
func TestDiskLimitOverlay(t *testing.T) {
	b := diskSandbox(t)
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	lower := filepath.Join(dir, "layer", "tree")
	os.MkdirAll(lower, 0o755)
	os.Chmod(filepath.Join(dir, "layer"), 0o755)
	// Larger than the limit: the lower layer is not counted.
	os.WriteFile(filepath.Join(lower, "base.bin"), make([]byte, 8<<20), 0o644)
	run := filepath.Join(dir, "run")
	ws := backend.Workspace{Dir: filepath.Join(run, "snapshot"), Lower: lower, Upper: filepath.Join(run, "overlay", "upper"), Work: filepath.Join(run, "overlay", "work")}
	for _, d := range []string{ws.Dir, ws.Upper, ws.Work} {
		os.MkdirAll(d, 0o755)
	}
	for _, d := range []string{run, filepath.Dir(ws.Upper)} {
		os.Chmod(d, 0o755)
	}
	spec, _, errb := backendtest.Spec(t, "/bin/sh", "-c",
		"test -s base.bin && echo changed > result.txt && dd if=/dev/zero of=big bs=1M count=64; rc=$?; ls -l big >&2; exit $rc")
	spec.Workspace = ws
	spec.Limits.DiskBytes = 4 << 20
	out, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out.Release == nil {
		t.Fatal("no Release")
	}
	defer out.Release()
	if out.ExitCode == nil || *out.ExitCode == 0 || !strings.Contains(errb.String(), "No space left on device") {
		t.Errorf("exit %s, stderr %q; want ENOSPC and a non-zero exit", exitString(out), errb.String())
	}
	if got, want := out.Layers, []string{out.Layers[0], lower}; len(got) != 2 || got[1] != want[1] {
		t.Fatalf("layers = %q, want the upper layer then %s", got, lower)
	}
	if got, err := os.ReadFile(filepath.Join(out.Layers[0], "result.txt")); err != nil || string(got) != "changed\n" {
		t.Errorf("upper result.txt = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(ws.Upper, "result.txt")); err == nil {
		t.Error("the change reached the on-disk upper dir")
	}
}

// The tmpfs is memory charged to the job: under a memory limit smaller
// than its disk limit, a job that fills its workspace is OOM-killed
// before it sees ENOSPC (docs/api.md, limits.disk_mb).
func TestDiskCountsAgainstMemory(t *testing.T) {
	b := diskSandbox(t)
	backendtest.NeedLimit(t, b, job.LimitMemory)
	spec, _, errb := backendtest.Spec(t, "/bin/sh", "-c", "dd if=/dev/zero of=big bs=1M count=256")
	spec.Limits.DiskBytes, spec.Limits.MemoryBytes = 512<<20, 64<<20
	out, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	out.Release()
	if out.Reason != job.ReasonOOM {
		t.Errorf("reason = %q (exit %s, stderr %q), want %q", out.Reason, exitString(out), errb.String(), job.ReasonOOM)
	}
}

// Release frees the workspace: its files are gone from the layers.
func TestDiskRelease(t *testing.T) {
	b := diskSandbox(t)
	out, _, ws := runDisk(t, b, backend.Limits{DiskBytes: 8 << 20}, "echo kept > kept.txt")
	if _, err := os.Stat(filepath.Join(ws, "kept.txt")); err != nil {
		t.Fatalf("before Release: %v", err)
	}
	out.Release()
	if _, err := os.Stat(filepath.Join(ws, "kept.txt")); err == nil {
		t.Error("the workspace is still readable after Release")
	}
}
