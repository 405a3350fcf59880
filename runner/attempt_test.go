package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
)

// TestRerunAfterUnfinishedAttempt covers a redelivered job whose previous
// attempt died after the snapshot and artifacts were written but before
// result.json: the second attempt must start clean, not fail on the
// leftovers.
func TestRerunAfterUnfinishedAttempt(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "alpha\n"})
	req := f.request([]string{"cp", "a.txt", "out.txt"}, "cp")
	req.JobID = "job_redelivered"
	req.Policy.ArtifactGlobs = []string{"out.txt"}
	first := f.run(req)
	if first.Status != job.StatusCompleted {
		t.Fatalf("first attempt = %s %+v", first.Status, first.Error)
	}
	dir := f.r.Store().RunDir(req.JobID)
	// The crash: no result.json, a stale file in the snapshot.
	os.Remove(filepath.Join(dir, store.ResultFile))
	os.WriteFile(filepath.Join(dir, store.SnapshotDir, "stale.txt"), []byte("from attempt 1"), 0o644)
	again := f.run(req)
	if again.Status != job.StatusCompleted || again.Replay.WorkspaceSnapshotSHA256 != first.Replay.WorkspaceSnapshotSHA256 {
		t.Fatalf("second attempt = %s %+v, snapshot %s; want completed on the same snapshot %s",
			again.Status, again.Error, again.Replay.WorkspaceSnapshotSHA256, first.Replay.WorkspaceSnapshotSHA256)
	}
	if _, err := os.Stat(filepath.Join(dir, store.SnapshotDir, "stale.txt")); err == nil {
		t.Error("the snapshot kept a file from the unfinished attempt")
	}
	if len(again.Artifacts) != 1 || again.Replay != first.Replay {
		t.Errorf("second attempt artifacts %+v replay %+v; want the first attempt's", again.Artifacts, again.Replay)
	}
}

// TestDuplicateExecuteWhileRunning: a second Execute of an id that is
// running in the same runner answers job.conflict and leaves the running
// job's record alone.
func TestDuplicateExecuteWhileRunning(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "alpha\n"})
	req := f.request([]string{"python3", "-c", "import os,sys,time\nprint('ready', flush=True)\nwhile not os.path.exists('go'): time.sleep(0.01)\nprint('done')"}, "python3")
	req.JobID = "job_dup"
	if err := f.r.Prepare(&req); err != nil {
		t.Fatal(err)
	}
	running := make(chan struct{})
	done := make(chan job.Result)
	go func() {
		done <- f.r.Execute(context.Background(), req, runner.Options{
			Output: func(_, stream string, p []byte) {
				if stream == "stdout" && string(p) == "ready\n" {
					close(running)
				}
			},
		})
	}()
	<-running
	dup := f.r.Execute(context.Background(), req, runner.Options{})
	os.WriteFile(filepath.Join(f.r.Store().RunDir(req.JobID), store.SnapshotDir, "go"), nil, 0o644)
	first := <-done
	if dup.Error == nil || dup.Error.Code != job.CodeJobConflict {
		t.Errorf("duplicate Execute = %s %+v, want %s", dup.Status, dup.Error, job.CodeJobConflict)
	}
	if first.Status != job.StatusCompleted || first.Stdout.Text != "ready\ndone\n" {
		t.Errorf("running job = %s %+v %q, want completed", first.Status, first.Error, first.Stdout.Text)
	}
	stored, err := f.r.Store().ReadResult(req.JobID)
	if err != nil || stored.Status != job.StatusCompleted {
		t.Errorf("stored result = %s, %v; want the running job's completed result", stored.Status, err)
	}
}
