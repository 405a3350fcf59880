package taskstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
)

// countingQueue takes every task and runs none.
type countingQueue struct{ enqueued atomic.Int64 }

func (q *countingQueue) EnqueueTask(context.Context, string, []byte) error {
	q.enqueued.Add(1)
	return nil
}
func (q *countingQueue) QueuedTask(context.Context, string) (bool, error) { return false, nil }
func (q *countingQueue) RemoveTask(context.Context, string) error         { return nil }
func (q *countingQueue) CancelTask(string) error                          { return nil }

// TestConcurrentSubmitsOfOneIDGiveOneTask: the id was checked with a stat
// and then created, so of 20 concurrent submits of one id two were
// accepted in 7 of 20 tries.
func TestConcurrentSubmitsOfOneIDGiveOneTask(t *testing.T) {
	s, err := New(t.TempDir(), lifecycle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	q := &countingQueue{}
	s.Queue = q
	doc := []byte("version: \"1\"\nkind: Task\nmetadata: {id: same-id, name: n}\nrepository: {url: /nowhere, branch: main}\nclaude: {prompt: p}\n")
	var accepted, conflicts atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			switch _, err := s.Submit(doc); job.CodeOf(err) {
			case "":
				accepted.Add(1)
			case job.CodeJobConflict:
				conflicts.Add(1)
			default:
				t.Errorf("Submit = %v", err)
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 1 || conflicts.Load() != 199 || q.enqueued.Load() != 1 {
		t.Errorf("200 submits of one id: %d accepted, %d job.conflict, %d queued; want 1, 199, 1", accepted.Load(), conflicts.Load(), q.enqueued.Load())
	}
}
