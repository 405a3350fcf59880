package jobs_test

import (
	"context"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// TestDropUnqueuedEndsAbandonedRuns: a run left "running" by a process
// that died (a task's step, a run of `agent-runner run`), with its lock
// free and no message in the queue, ends failed run.interrupted; one whose
// lock a process holds is left running.
func TestDropUnqueuedEndsAbandonedRuns(t *testing.T) {
	svc, ws := openPlane(t)
	st := svc.Store()
	write := func(id string) {
		t.Helper()
		req := request(id, ws, "true")
		if err := st.Create(id); err != nil {
			t.Fatal(err)
		}
		if err := st.WriteRequest(req); err != nil {
			t.Fatal(err)
		}
		if err := st.WriteStatus(store.StatusRecord{JobID: id, Status: job.StatusRunning}); err != nil {
			t.Fatal(err)
		}
	}
	abandoned, held := "task-1.agent", "task-2.agent"
	write(abandoned)
	write(held)
	unlock, err := st.LockRun(context.Background(), held, false)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()

	if _, err := svc.DropUnqueued(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := st.ReadResult(abandoned)
	if err != nil {
		t.Fatalf("abandoned run has no result: %v", err)
	}
	if res.Status != job.StatusFailed || res.Error == nil || res.Error.Code != job.CodeRunInterrupted {
		t.Errorf("abandoned run = %s %+v, want failed run.interrupted", res.Status, res.Error)
	}
	if rec, _ := st.ReadStatus(abandoned); rec.Status != job.StatusFailed {
		t.Errorf("abandoned run's status.json = %s, want failed", rec.Status)
	}
	if rec, _ := st.ReadStatus(held); rec.Status != job.StatusRunning {
		t.Errorf("a run whose lock is held = %s, want running", rec.Status)
	}
	if _, err := st.ReadResult(held); err == nil {
		t.Error("a run whose lock is held got a result")
	}
}
