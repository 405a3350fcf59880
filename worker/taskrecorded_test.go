package worker_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/worker"
)

// taskRunner is a worker.TaskRunner with a function field.
type taskRunner struct {
	run func(ctx context.Context, id string, payload []byte, attempt int) error
}

func (r taskRunner) RunQueued(ctx context.Context, id string, payload []byte, attempt int) error {
	return r.run(ctx, id, payload, attempt)
}

// TestTaskRecordedFailureLeavesTheTaskQueued: a task whose record cannot
// be handed over is not acknowledged; its next delivery hands it over
// again, and only then is it acknowledged.
func TestTaskRecordedFailureLeavesTheTaskQueued(t *testing.T) {
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: filepath.Join(t.TempDir(), "nats"), Capacity: 10, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	if err := q.EnqueueTask(context.Background(), "task-1", []byte("manifest")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var attempts []int
	var handed []string
	done := make(chan struct{}, 4)
	tasks := taskRunner{run: func(_ context.Context, id string, _ []byte, attempt int) error {
		mu.Lock()
		attempts = append(attempts, attempt)
		mu.Unlock()
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	pool := worker.New(worker.Config{Workers: 1, Queue: q, Grace: 5 * time.Second, Tasks: tasks, TaskWorkers: 1,
		TaskRecorded: func(_ context.Context, id string) error {
			mu.Lock()
			defer mu.Unlock()
			handed = append(handed, id)
			if len(handed) == 1 {
				return errors.New("bucket unreachable")
			}
			done <- struct{}{}
			return nil
		},
	})
	stopped := make(chan struct{})
	go func() { pool.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the task's record was never handed over")
	}
	waitDrained(t, q)
	mu.Lock()
	defer mu.Unlock()
	if len(handed) != 2 || handed[0] != "task-1" || handed[1] != "task-1" {
		t.Errorf("TaskRecorded calls = %q, want task-1 twice (the failure, then the redelivery)", handed)
	}
	if len(attempts) != 2 || attempts[0] != 1 || attempts[1] != 2 {
		t.Errorf("deliveries = %v, want attempts 1 and 2", attempts)
	}
}
