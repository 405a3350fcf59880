package taskstore

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

func openQueue(t *testing.T, capacity int64) *queue.Queue {
	t.Helper()
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: t.TempDir(), Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return q
}

func agentDoc(id, origin string) []byte {
	return []byte(`version: "1"
kind: Task
metadata: {id: ` + id + `, name: q}
repository: {url: "` + origin + `", branch: main}
claude: {prompt: p}
agent: {command: ["/bin/sh", "-c", "echo queued > a.txt"]}
`)
}

// TestTasksTakeTheirPlaceInTheQueue: a submitted task waits pending in the
// queue beside jobs; a full queue refuses it and keeps no record; the
// worker side (RunQueued) runs it to completion; a cancelled pending task
// leaves the queue.
func TestTasksTakeTheirPlaceInTheQueue(t *testing.T) {
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n"})
	q := openQueue(t, 2)
	s, err := New(t.TempDir(), lifecycle.Config{Backend: localprocess.Backend{}})
	if err != nil {
		t.Fatal(err)
	}
	s.Queue = q
	ctx := context.Background()
	if err := q.Enqueue(ctx, "job_one", []byte(`{}`)); err != nil { // a job holds one of the two places
		t.Fatal(err)
	}
	id, err := s.Submit(agentDoc("queued-1", origin))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Open(id); m.Current().State != state.Pending {
		t.Fatalf("submitted task is %s, want pending until a worker takes it", m.Current().State)
	}
	if _, err := s.Submit(agentDoc("queued-2", origin)); job.CodeOf(err) != job.CodeQueueFull {
		t.Fatalf("submit into a full queue = %v, want %s", err, job.CodeQueueFull)
	}
	if _, err := os.Stat(s.Dir("queued-2")); !os.IsNotExist(err) {
		t.Errorf("a refused task left a record: %v", err)
	}
	d, err := q.NextTask(ctx, 5*time.Second)
	if err != nil || d.JobID != id {
		t.Fatalf("NextTask = %+v, %v; want %s", d, err, id)
	}
	if err := s.RunQueued(ctx, d.JobID, d.Payload, d.Attempt); err != nil {
		t.Fatal(err)
	}
	if err := d.Done(ctx); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Open(id); m.Current().State != state.Completed {
		t.Errorf("task after RunQueued = %+v, want completed", m.Current())
	}
	// A cancelled pending task leaves the queue.
	id3, err := s.Submit(agentDoc("queued-3", origin))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(id3); err != nil {
		t.Fatal(err)
	}
	if queued, _ := q.QueuedTask(ctx, id3); queued {
		t.Errorf("a cancelled pending task is still queued")
	}
	if m, _ := s.Open(id3); m.Current().State != state.Cancelled {
		t.Errorf("cancelled task = %s", m.Current().State)
	}
}

// TestRunQueuedOnAnotherStore: a worker whose store has no record of the
// task records it from the message and runs it; a redelivered task that
// had started ends failed as interrupted, never runs twice.
func TestRunQueuedOnAnotherStore(t *testing.T) {
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n"})
	w, err := New(t.TempDir(), lifecycle.Config{Backend: localprocess.Backend{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.RunQueued(ctx, "elsewhere", agentDoc("elsewhere", origin), 1); err != nil {
		t.Fatal(err)
	}
	if m, err := w.Open("elsewhere"); err != nil || m.Current().State != state.Completed {
		t.Fatalf("task on a worker's own store = %v, %v; want completed", m, err)
	}
	if err := w.RunQueued(ctx, "other-id", agentDoc("elsewhere", origin), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Open("other-id"); err == nil {
		t.Errorf("a message whose manifest names another task was recorded")
	}
	// Started, then its worker died: the redelivery ends it.
	seed(t, w.Root, "started", state.Running, time.Now())
	if err := w.RunQueued(ctx, "started", agentDoc("started", origin), 2); err != nil {
		t.Fatal(err)
	}
	m, _ := w.Open("started")
	if rec := m.Current(); rec.State != state.Failed || rec.Error == nil || rec.Error.Code != job.CodeRunInterrupted {
		t.Errorf("redelivered started task = %+v, want failed %s", rec, job.CodeRunInterrupted)
	}
}

// TestShutdownInterruptsATask: a task whose worker shuts down ends
// failed with run.interrupted (the cause the worker gives), not cancelled.
func TestShutdownInterruptsATask(t *testing.T) {
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n"})
	w, err := New(t.TempDir(), lifecycle.Config{Backend: localprocess.Backend{}})
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`version: "1"
kind: Task
metadata: {id: slow, name: q}
repository: {url: "` + origin + `", branch: main}
claude: {prompt: p}
agent: {command: ["/bin/sleep", "30"]}
`)
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(time.Second, func() { cancel(job.Errorf(job.CodeRunInterrupted, "the worker shut down")) })
	if err := w.RunQueued(ctx, "slow", doc, 1); err != nil {
		t.Fatal(err)
	}
	m, _ := w.Open("slow")
	if rec := m.Current(); rec.State != state.Failed || rec.Error == nil || rec.Error.Code != job.CodeRunInterrupted {
		t.Errorf("task stopped by shutdown = %+v, want failed %s", rec, job.CodeRunInterrupted)
	}
}
