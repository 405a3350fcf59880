package worker_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/worker"
)

// TestRecordedFailureLeavesTheJobQueued: a job whose record cannot be
// handed over is not acknowledged; its redelivery finds the result
// recorded, hands it over again without running the job again, and only
// then acknowledges it.
func TestRecordedFailureLeavesTheJobQueued(t *testing.T) {
	g := newRig(t)
	// A short ack wait, so the unacknowledged job comes back quickly.
	g.q.Close()
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: filepath.Join(t.TempDir(), "nats"), Capacity: 10, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	g.q = q
	g.enqueue(t, g.request(t, "job_rec", "echo", "hi"))
	var mu sync.Mutex
	var calls []string
	handed := make(chan struct{}, 4)
	runs := 0
	ctx, cancel := context.WithCancel(context.Background())
	pool := worker.New(worker.Config{Workers: 1, Runner: g.r, Queue: q, Grace: 5 * time.Second,
		Started: func(job.Request, int) { mu.Lock(); runs++; mu.Unlock() },
		Recorded: func(_ context.Context, id string) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, id)
			if len(calls) == 1 {
				return errors.New("bucket unreachable")
			}
			handed <- struct{}{}
			return nil
		},
	})
	done := make(chan struct{})
	go func() { pool.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	select {
	case <-handed:
	case <-time.After(30 * time.Second):
		t.Fatal("the record was never handed over")
	}
	waitDrained(t, q)
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[0] != "job_rec" || calls[1] != "job_rec" {
		t.Errorf("Recorded calls = %q, want job_rec twice (the failure, then the redelivery)", calls)
	}
	if runs != 1 {
		t.Errorf("the job ran %d times, want once (the redelivery finds its result)", runs)
	}
	if res, err := g.r.Store().ReadResult("job_rec"); err != nil || res.Status != job.StatusCompleted {
		t.Errorf("ReadResult = %s, %v; want completed", res.Status, err)
	}
}

func waitDrained(t *testing.T, q *queue.Queue) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := q.Depth(context.Background())
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue depth = %d, %v; want the job acknowledged", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
