package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// replayWithin runs Replay and fails the test if it has not returned
// after 10 s (the old replay blocked forever opening a FIFO).
func replayWithin(t *testing.T, r *runner.Runner, dir string) (runner.ReplayReport, error) {
	t.Helper()
	type out struct {
		rep runner.ReplayReport
		err error
	}
	done := make(chan out, 1)
	go func() {
		rep, err := r.Replay(context.Background(), dir)
		done <- out{rep, err}
	}()
	select {
	case o := <-done:
		return o.rep, o.err
	case <-time.After(10 * time.Second):
		t.Fatal("Replay still blocked after 10 s")
		return runner.ReplayReport{}, nil
	}
}

// TestReplayRefusesAFIFOInTheSnapshot: the job replaced a file of its
// stored snapshot with a FIFO and the workspace changed since; the replay
// ends with run.snapshot_failed naming the FIFO instead of hanging.
func TestReplayRefusesAFIFOInTheSnapshot(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "alpha\n"})
	res := f.run(f.request([]string{"cat", "a.txt"}, "cat"))
	dir := f.r.Store().RunDir(res.JobID)
	p := filepath.Join(dir, "snapshot", "a.txt")
	os.Remove(p)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(f.ws, "a.txt"), []byte("changed"), 0o644)
	rep, err := replayWithin(t, f.r, dir)
	if err != nil || rep.Error == nil {
		t.Fatalf("replay = %+v, %v; want a report with an error", rep, err)
	}
	if got, want := rep.Error.Code, job.CodeSnapshotFailed; got != want {
		t.Errorf("replay error code = %q, want %q", got, want)
	}
	if cause, _ := rep.Error.Details["cause"].(string); !strings.Contains(cause, "not a regular file") {
		t.Errorf("replay error cause = %q, want it to name the non-regular file", cause)
	}
}

// TestReplayRefusesASymlinkedSnapshotDirectory: the job turned its
// snapshot's directory d into a link to a host directory holding the same
// content; the old replay followed it and ran on the host's files.
func TestReplayRefusesASymlinkedSnapshotDirectory(t *testing.T) {
	f := newFixture(t, map[string]string{"d/b.txt": "beta\n"})
	res := f.run(f.request([]string{"cat", "d/b.txt"}, "cat"))
	dir := f.r.Store().RunDir(res.JobID)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "b.txt"), []byte("beta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	snapD := filepath.Join(dir, "snapshot", "d")
	if err := os.RemoveAll(snapD); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, snapD); err != nil {
		t.Fatal(err)
	}
	rep, err := replayWithin(t, f.r, dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.WorkspaceSource == "snapshot" {
		t.Errorf("replay restored the snapshot through d -> %s", outside)
	}
	if !rep.Reproduced || rep.WorkspaceSource != "workspace" {
		t.Errorf("replay = %+v; want reproduced from the unchanged original workspace", rep)
	}
}

// TestReplayWithIncludeAndExcludeReproduces: a job whose workspace was
// selected by include or exclude globs replays on its restored snapshot
// and reproduces. The old replay dropped the globs, so the restored
// workspace was hashed with its parent directories listed and the
// workspace_snapshot_sha256 check never matched.
func TestReplayWithIncludeAndExcludeReproduces(t *testing.T) {
	files := map[string]string{"src/a.txt": "alpha\n", "src/deep/b.txt": "beta\n", "docs/c.txt": "gamma\n", "x.log": "log\n"}
	for _, tc := range []struct {
		name             string
		include, exclude []string
	}{
		{"include", []string{"src/**"}, nil},
		{"include directory", []string{"src"}, nil},
		{"exclude", nil, []string{"*.log", "docs/**"}},
		{"both", []string{"src/**", "x.log"}, []string{"src/deep/**"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, files)
			req := f.request([]string{"find", ".", "-type", "f"}, "find")
			req.Workspace.Include, req.Workspace.Exclude = tc.include, tc.exclude
			res := f.run(req)
			if res.Status != job.StatusCompleted {
				t.Fatalf("run status = %q (%+v), want completed", res.Status, res.Error)
			}
			rep, err := replayWithin(t, f.r, f.r.Store().RunDir(res.JobID))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := rep.WorkspaceSource, "snapshot"; got != want {
				t.Errorf("workspace source = %q, want %q", got, want)
			}
			if !rep.Reproduced {
				t.Errorf("reproduced = false, want true; checks %+v", rep.Checks)
			}
		})
	}
}
