package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// TestInterruptedRunRecordsNothingTerminal: a run stopped to run again (a
// worker's shutdown, Options.Interrupted) leaves no result.json at any
// moment, and status.json running: readers never see it canceled.
func TestInterruptedRunRecordsNothingTerminal(t *testing.T) {
	f := newFixture(t, nil)
	req := f.request([]string{"sleep", "30"}, "sleep")
	req.JobID = "job_interrupted"
	if err := f.r.Prepare(&req); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	var terminal []job.Status
	res := f.r.Execute(ctx, req, runner.Options{Attempt: 1, Interrupted: func() bool { return true },
		Status: func(_ string, s job.Status) {
			if s.Terminal() {
				terminal = append(terminal, s)
			}
		}})
	if res.Status == job.StatusCompleted {
		t.Fatalf("sleep 30 canceled after 0.5 s completed")
	}
	if _, err := f.r.Store().ReadResult(req.JobID); err == nil {
		t.Error("an interrupted run wrote result.json")
	}
	if rec, err := f.r.Store().ReadStatus(req.JobID); err != nil || rec.Status != job.StatusRunning {
		t.Errorf("status.json = %+v, %v; want running", rec, err)
	}
	if len(terminal) > 0 {
		t.Errorf("terminal statuses reported: %v", terminal)
	}
	// The next attempt runs and records the job.
	req.Command.Argv = []string{"sleep", "0"}
	if again := f.r.Execute(context.Background(), req, runner.Options{Attempt: 2}); again.Status != job.StatusCompleted || again.Attempt != 2 {
		t.Errorf("next attempt = %s %+v attempt %d, want completed attempt 2", again.Status, again.Error, again.Attempt)
	}
}
