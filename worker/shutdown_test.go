package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/worker"
)

// startedPool runs a pool until stop is called; each attempt it starts
// is sent on the returned channel.
func startedPool(t *testing.T, g *rig, cfg worker.Config) (attempts <-chan int, stop func()) {
	t.Helper()
	ch := make(chan int, 4)
	cfg.Workers, cfg.Runner, cfg.Queue = 1, g.r, g.q
	cfg.Started = func(_ job.Request, attempt int) { ch <- attempt }
	cfg.Result = func(res job.Result) { t.Errorf("result recorded: %s attempt %d", res.Status, res.Attempt) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { worker.New(cfg).Run(ctx); close(done) }()
	return ch, func() { cancel(); <-done }
}

func nextAttempt(t *testing.T, attempts <-chan int) int {
	t.Helper()
	select {
	case a := <-attempts:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("the job was not delivered")
		return 0
	}
}

// TestShutdownLeavesRunningJobToRunAgain: a job still running when the
// grace ends is killed, not recorded canceled nor acknowledged, and a new
// pool gets it again as the next attempt. A closed Abort ends the grace
// at once.
func TestShutdownLeavesRunningJobToRunAgain(t *testing.T) {
	g := newRig(t)
	g.q.Close()
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: g.r.Store().Dir(), Capacity: 10, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	g.q = q
	req := g.request(t, "job_s1", "sleep", "60")
	g.enqueue(t, req)

	var drained []string
	attempts, stop := startedPool(t, g, worker.Config{Grace: 300 * time.Millisecond,
		Draining: func(_ time.Duration, ids []string) { drained = ids }})
	if got := nextAttempt(t, attempts); got != 1 {
		t.Fatalf("first delivery attempt = %d, want 1", got)
	}
	waitStatus(t, g, req.JobID, job.StatusRunning)
	time.Sleep(200 * time.Millisecond) // let sleep start
	t0 := time.Now()
	stop()
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("shutdown took %s with a 300ms grace", d)
	}
	if len(drained) != 1 || drained[0] != req.JobID {
		t.Errorf("draining told %v, want [%s]", drained, req.JobID)
	}
	assertNotFinished(t, g, req.JobID, 1)

	abort := make(chan struct{})
	attempts, stop = startedPool(t, g, worker.Config{Grace: time.Hour, Abort: abort})
	if got := nextAttempt(t, attempts); got != 2 {
		t.Errorf("redelivered attempt = %d, want 2", got)
	}
	waitStatus(t, g, req.JobID, job.StatusRunning)
	close(abort)
	t0 = time.Now()
	stop()
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("aborted shutdown took %s", d)
	}
	assertNotFinished(t, g, req.JobID, 2)
}

func waitStatus(t *testing.T, g *rig, id string, want job.Status) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if rec, err := g.r.Store().ReadStatus(id); err == nil && rec.Status == want {
			return
		}
	}
	t.Fatalf("job %s never reached %s", id, want)
}

// assertNotFinished: the record has no result and says running on
// attempt, and the message is still queued.
func assertNotFinished(t *testing.T, g *rig, id string, attempt int) {
	t.Helper()
	st := g.r.Store()
	if res, err := st.ReadResult(id); err == nil {
		t.Errorf("stopped job has a result: %s", res.Status)
	}
	if rec, err := st.ReadStatus(id); err != nil || rec.Status != job.StatusRunning || rec.Attempt != attempt {
		t.Errorf("stopped job's status = %+v, %v; want running on attempt %d", rec, err, attempt)
	}
	if g.drained(t) {
		t.Error("the stopped job's message was acknowledged")
	}
}
