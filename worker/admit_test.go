package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/worker"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// TestAdmitRefusesAPulledJob: a job on the queue whose workspace lies
// outside this worker's roots (the API node's check was skipped, or its
// roots differ) never runs: it ends policy_denied with
// validation.path_escape and its marker file is not written.
func TestAdmitRefusesAPulledJob(t *testing.T) {
	g := newRig(t)
	root := t.TempDir()
	roots := workspaceroot.Roots{Dirs: []string{root}}
	req := g.request(t, "job_outside", "touch", "ran")
	g.enqueue(t, req)
	results := make(chan job.Result, 1)
	ctx, cancel := context.WithCancel(context.Background())
	pool := worker.New(worker.Config{Workers: 1, Runner: g.r, Queue: g.q, Grace: 5 * time.Second,
		Admit:  func(m queue.Message) error { _, err := roots.Check(m.Request.Workspace.Path); return err },
		Result: func(res job.Result) { results <- res },
	})
	done := make(chan struct{})
	go func() { pool.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	select {
	case res := <-results:
		if res.Status != job.StatusPolicyDenied || res.Error == nil || res.Error.Code != job.CodePathEscape {
			t.Errorf("result = %s %+v, want policy_denied %s", res.Status, res.Error, job.CodePathEscape)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no result")
	}
	if _, err := os.Stat(filepath.Join(g.r.Store().RunDir("job_outside"), "snapshot", "ran")); err == nil {
		t.Error("the refused job ran")
	}
	if got, err := g.r.Store().ReadResult("job_outside"); err != nil || got.Error == nil || got.Error.Code != job.CodePathEscape {
		t.Errorf("recorded result = %+v, %v; want the path_escape error", got, err)
	}
}
