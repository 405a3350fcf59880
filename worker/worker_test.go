package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/worker"

	_ "github.com/agent-runner/agent-runner/backend/localprocess"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"),
		goleak.IgnoreTopFunction("time.Sleep"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats.go.(*Conn).flusher"),
	)
}

type rig struct {
	r       *runner.Runner
	q       *queue.Queue
	ws      string
	mu      sync.Mutex
	results []job.Result
	started []int
}

func newRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: "local_process"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: r.Store().Dir(), Capacity: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	return &rig{r: r, q: q, ws: ws}
}

// run starts a pool, waits for n results and stops it.
func (g *rig) run(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	got := make(chan struct{}, 16)
	pool := worker.New(worker.Config{Workers: 1, Runner: g.r, Queue: g.q, Grace: 5 * time.Second,
		Started: func(_ job.Request, attempt int) { g.mu.Lock(); g.started = append(g.started, attempt); g.mu.Unlock() },
		Result: func(res job.Result) {
			g.mu.Lock()
			g.results = append(g.results, res)
			g.mu.Unlock()
			got <- struct{}{}
		},
	})
	go func() { pool.Run(ctx); close(done) }()
	for range n {
		select {
		case <-got:
		case <-time.After(30 * time.Second):
			t.Fatal("no result")
		}
	}
	cancel()
	<-done
}

func (g *rig) request(t *testing.T, id string, argv ...string) job.Request {
	t.Helper()
	req := job.Request{JobID: id, Workspace: job.Workspace{Path: g.ws}, Command: job.Command{Argv: argv},
		Policy: job.Policy{AllowedCommands: []job.CommandRule{{Basename: argv[0]}}}}
	if err := g.r.Prepare(&req); err != nil {
		t.Fatal(err)
	}
	return req
}

func (g *rig) enqueue(t *testing.T, req job.Request) {
	t.Helper()
	b, _ := json.Marshal(req)
	if err := g.q.Enqueue(context.Background(), req.JobID, b); err != nil {
		t.Fatal(err)
	}
}

// drained reports whether the queue holds no message.
func (g *rig) drained(t *testing.T) bool {
	n, err := g.q.Depth(context.Background())
	return err == nil && n == 0
}

func TestRunsAndAcknowledges(t *testing.T) {
	g := newRig(t)
	req := g.request(t, "job_w1", "echo", "hi")
	g.enqueue(t, req)
	g.run(t, 1)
	if len(g.results) != 1 || g.results[0].Status != job.StatusCompleted || g.results[0].Attempt != 1 {
		t.Fatalf("results = %+v, want one completed on attempt 1", g.results)
	}
	if !g.drained(t) {
		t.Error("the job message is still queued after its result")
	}
}

// TestInterruptedJobRunsAgain: a record left "running" by a dead worker
// means the next delivery is the next attempt.
func TestInterruptedJobRunsAgain(t *testing.T) {
	g := newRig(t)
	req := g.request(t, "job_w2", "echo", "again")
	st := g.r.Store()
	st.Create(req.JobID)
	st.WriteRequest(req)
	st.WriteStatus(store.StatusRecord{JobID: req.JobID, Status: job.StatusRunning, Attempt: 1, Backend: req.Backend.Kind})
	g.enqueue(t, req)
	g.run(t, 1)
	if res := g.results[0]; res.Status != job.StatusCompleted || res.Attempt != 2 {
		t.Errorf("interrupted job = %s attempt %d, want completed on attempt 2", res.Status, res.Attempt)
	}
}

// TestInterruptedJobThatOptedOutFails: on_interrupt "fail" ends the job
// as failed with run.interrupted instead of running it again.
func TestInterruptedJobThatOptedOutFails(t *testing.T) {
	g := newRig(t)
	req := g.request(t, "job_w3", "echo", "never")
	req.OnInterrupt = "fail"
	st := g.r.Store()
	st.Create(req.JobID)
	st.WriteRequest(req)
	st.WriteStatus(store.StatusRecord{JobID: req.JobID, Status: job.StatusRunning, Attempt: 1, Backend: req.Backend.Kind})
	g.enqueue(t, req)
	g.run(t, 1)
	res := g.results[0]
	if res.Status != job.StatusFailed || res.Error == nil || res.Error.Code != job.CodeRunInterrupted || res.Stdout.Text != "" {
		t.Errorf("opted-out job = %s %+v stdout %q, want failed run.interrupted without running", res.Status, res.Error, res.Stdout.Text)
	}
}

// TestFinishedJobIsNotRunAgain: a message for a job that already has a
// result (canceled while queued, or a redelivery after the result was
// written) is acknowledged without running anything.
func TestFinishedJobIsNotRunAgain(t *testing.T) {
	g := newRig(t)
	canceled := g.request(t, "job_w4", "echo", "must not run")
	want := g.r.Terminate(canceled, job.Errorf(job.CodeRunCanceled, "canceled"), 0)
	g.enqueue(t, canceled)
	// A second job proves the worker went past the first.
	g.enqueue(t, g.request(t, "job_w5", "true"))
	g.run(t, 1)
	if len(g.results) != 1 || g.results[0].JobID != "job_w5" {
		t.Fatalf("results = %+v, want only job_w5", g.results)
	}
	if len(g.started) != 1 {
		t.Errorf("started %d jobs, want 1", len(g.started))
	}
	got, err := g.r.Store().ReadResult("job_w4")
	if err != nil || got.Status != job.StatusCanceled || got.Replay.ResultSHA256 != want.Replay.ResultSHA256 {
		t.Errorf("canceled job's result = %s, %v; want the canceled result unchanged", got.Status, err)
	}
	if !g.drained(t) {
		t.Error("messages left in the queue")
	}
}

// TestCancelKillsARunningJob: a cancel message reaches the pool running
// the job.
func TestCancelKillsARunningJob(t *testing.T) {
	g := newRig(t)
	req := g.request(t, "job_w6", "sleep", "30")
	g.enqueue(t, req)
	go func() {
		for {
			if rec, err := g.r.Store().ReadStatus(req.JobID); err == nil && rec.Status == job.StatusRunning {
				time.Sleep(100 * time.Millisecond) // let the process start
				g.q.Cancel(req.JobID)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	g.run(t, 1)
	if res := g.results[0]; res.Status != job.StatusCanceled {
		t.Errorf("canceled running job = %s, want canceled", res.Status)
	}
}
