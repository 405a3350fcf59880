package artifact

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
)

// scan opens ws as the only layer and matches globs in it, as Collect does
// before it copies.
func scan(t *testing.T, ws string, globs ...string) ([]*safecopy.Root, []candidate) {
	t.Helper()
	roots, err := openLayers([]string{ws})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { roots[0].Close() })
	files, _, err := match(context.Background(), roots, globs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return roots, files
}

// within fails the test if fn has not returned after 10 s: opening a FIFO
// without O_NONBLOCK blocks until a writer comes, which is never.
func within(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still blocked after 10 s")
	}
}

// TestCollectSkipsSpecialFiles: a FIFO and a /dev/zero twin matching the
// globs are denied without being opened; a sparse 8 GiB file is refused at
// its cap and nothing of it reaches the run record.
func TestCollectSkipsSpecialFiles(t *testing.T) {
	ws := workspace(t, map[string]string{"out/ok.txt": "ok"})
	if err := syscall.Mkfifo(filepath.Join(ws, "out", "pipe.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantDenied := []string{"out/pipe.txt: not a regular file"}
	if err := syscall.Mknod(filepath.Join(ws, "out", "zero.txt"), syscall.S_IFCHR|0o644, 1<<8|5); err == nil {
		wantDenied = append(wantDenied, "out/zero.txt: not a regular file")
	} else {
		t.Logf("mknod is not permitted here (%v): the device case is not run", err)
	}
	dest := t.TempDir()
	var res Result
	var err error
	within(t, func() {
		res, err = Collect(context.Background(), []string{ws}, []string{"out/*"}, nil, Limits{MaxFileBytes: 1 << 20}, dest)
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"out/ok.txt"}, paths(res.Artifacts)); diff != "" {
		t.Errorf("collected (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantDenied, res.Denied); diff != "" {
		t.Errorf("denied (-want +got):\n%s", diff)
	}

	sparse := filepath.Join(ws, "out", "sparse.txt")
	if err := os.WriteFile(sparse, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, 8<<30); err != nil {
		t.Fatal(err)
	}
	within(t, func() {
		res, err = Collect(context.Background(), []string{ws}, []string{"out/sparse.txt"}, nil, Limits{MaxFileBytes: 1 << 20}, dest)
	})
	if err != nil || len(res.Skipped) != 1 || res.Skipped[0].Reason != job.SkipMaxArtifactFileBytes {
		t.Errorf("sparse 8 GiB artifact: skipped %+v, error %v; want it skipped for %s", res.Skipped, err, job.SkipMaxArtifactFileBytes)
	}
	if fi, err := os.Stat(filepath.Join(dest, "out", "sparse.txt")); err == nil {
		t.Errorf("a %d-byte copy of the sparse file is in the run record", fi.Size())
	}
}

// TestCopyRefusesSwapsAfterTheScan: between the scan and the copy the job
// swaps a matched file for a FIFO, a matched file's directory for a link
// to a host directory, and an empty file for a sparse 8 GiB one. The old
// copy blocked on the FIFO and read the host file through the link.
func TestCopyRefusesSwapsAfterTheScan(t *testing.T) {
	ws := workspace(t, map[string]string{"a.out": "a", "d/x.out": "x", "grows.out": ""})
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "x.out"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	roots, files := scan(t, ws, "*.out", "d/*.out")
	os.Remove(filepath.Join(ws, "a.out"))
	if err := syscall.Mkfifo(filepath.Join(ws, "a.out"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(ws, "d"))
	if err := os.Symlink(outside, filepath.Join(ws, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(ws, "grows.out"), 8<<30); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	var (
		c   *collection
		err error
	)
	within(t, func() {
		c, err = copyAll(context.Background(), roots, files, Limits{MaxFileBytes: 1 << 20}, dest)
	})
	if err != nil || len(c.skipped) != 1 || c.skipped[0].Reason != job.SkipGrewPastCap {
		t.Errorf("copy of a file grown to 8 GiB: skipped %+v, error %v; want it skipped for %s", c.skipped, err, job.SkipGrewPastCap)
	}
	if len(c.artifacts) != 0 {
		t.Errorf("collected %v, want nothing", paths(c.artifacts))
	}
	denied := c.denied
	if diff := cmp.Diff([]string{"a.out: not a regular file", "d/x.out: symlinks are never collected"}, denied); diff != "" {
		t.Errorf("denied (-want +got):\n%s", diff)
	}
	filepath.Walk(dest, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			t.Errorf("%s (%d bytes) was left in the run record", p, fi.Size())
		}
		return nil
	})
}

// copyAll runs the copy stage alone on files scanned before.
func copyAll(ctx context.Context, roots []*safecopy.Root, files []candidate, lim Limits, dest string) (*collection, error) {
	c := &collection{roots: roots, lim: lim, destDir: dest, artifacts: []job.Artifact{}}
	return c, c.copyAll(ctx, files)
}
