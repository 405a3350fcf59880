package taskstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestRedeliveryToAnotherStoreEndsInterrupted: a task delivered again
// (attempt 2) to a worker whose store never saw it went first to a worker
// that stopped, maybe mid-run: it is recorded and ends failed,
// run.interrupted, without running (no staged workspace, no agent output).
func TestRedeliveryToAnotherStoreEndsInterrupted(t *testing.T) {
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n"})
	w, err := New(t.TempDir(), lifecycle.Config{Backend: localprocess.Backend{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RunQueued(context.Background(), "second", agentDoc("second", origin), 2); err != nil {
		t.Fatal(err)
	}
	m, err := w.Open("second")
	if err != nil {
		t.Fatal(err)
	}
	if rec := m.Current(); rec.State != state.Failed || rec.Error == nil || rec.Error.Code != job.CodeRunInterrupted {
		t.Errorf("redelivered task on a fresh store = %s %+v, want failed %s", rec.State, rec.Error, job.CodeRunInterrupted)
	}
	if _, err := os.Stat(filepath.Join(w.Dir("second"), "inbox")); err == nil {
		t.Error("the redelivered task was staged: it ran a second time")
	}
}
