package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The embedded NATS server and client keep a few process-wide
		// goroutines (timers, the client's flusher) after Close.
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"),
		goleak.IgnoreTopFunction("time.Sleep"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats.go.(*Conn).flusher"),
	)
}

func open(t *testing.T, cfg queue.Config) *queue.Queue {
	t.Helper()
	if cfg.StoreDir == "" && cfg.URL == "" {
		cfg.StoreDir = t.TempDir()
	}
	q, err := queue.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return q
}

func next(t *testing.T, q *queue.Queue) queue.Delivery {
	t.Helper()
	d, err := q.Next(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return d
}

// TestCapacityDiscardsNew fills the queue and checks the next publish is
// queue.full while everything accepted stays and is delivered.
func TestCapacityDiscardsNew(t *testing.T) {
	ctx := context.Background()
	q := open(t, queue.Config{Capacity: 3})
	for _, id := range []string{"job_a", "job_b", "job_c"} {
		if err := q.Enqueue(ctx, id, []byte(id)); err != nil {
			t.Fatalf("Enqueue(%s): %v", id, err)
		}
	}
	err := q.Enqueue(ctx, "job_d", []byte("job_d"))
	if got := job.CodeOf(err); got != job.CodeQueueFull {
		t.Fatalf("Enqueue beyond capacity = %v, want %s", err, job.CodeQueueFull)
	}
	if n, _ := q.Depth(ctx); n != 3 {
		t.Errorf("Depth = %d, want 3", n)
	}
	var got []string
	for range 3 {
		d := next(t, q)
		got = append(got, d.JobID)
		if string(d.Payload) != d.JobID || d.Attempt != 1 {
			t.Errorf("delivery %s: payload %q attempt %d, want its id and attempt 1", d.JobID, d.Payload, d.Attempt)
		}
		if err := d.Done(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"job_a", "job_b", "job_c"}, got); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	// Acknowledged jobs leave the queue, making room again.
	if n, _ := q.Depth(ctx); n != 0 {
		t.Errorf("Depth after acks = %d, want 0", n)
	}
	if err := q.Enqueue(ctx, "job_d", nil); err != nil {
		t.Errorf("Enqueue after acks: %v", err)
	}
}

// TestDuplicateEnqueueIsOneJob: the job id is the JetStream message id.
func TestDuplicateEnqueueIsOneJob(t *testing.T) {
	ctx := context.Background()
	q := open(t, queue.Config{Capacity: 10})
	for range 3 {
		if err := q.Enqueue(ctx, "job_same", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := q.Depth(ctx); n != 1 {
		t.Errorf("Depth after three enqueues of one id = %d, want 1", n)
	}
	if ok, err := q.Queued(ctx, "job_same"); !ok || err != nil {
		t.Errorf("Queued(job_same) = %v, %v, want true", ok, err)
	}
	if ok, err := q.Queued(ctx, "job_other"); ok || err != nil {
		t.Errorf("Queued(job_other) = %v, %v, want false", ok, err)
	}
}

// TestUnackedJobIsRedelivered: a worker that stops keeping a job alive
// loses it to the next worker, with the attempt count raised.
func TestUnackedJobIsRedelivered(t *testing.T) {
	ctx := context.Background()
	q := open(t, queue.Config{Capacity: 10, AckWait: 300 * time.Millisecond})
	if err := q.Enqueue(ctx, "job_r", []byte("r")); err != nil {
		t.Fatal(err)
	}
	first := next(t, q)
	if first.Attempt != 1 {
		t.Fatalf("first attempt = %d, want 1", first.Attempt)
	}
	// No ack, no keep-alive: the message comes back.
	again := next(t, q)
	if again.JobID != "job_r" || again.Attempt != 2 {
		t.Errorf("redelivery = %s attempt %d, want job_r attempt 2", again.JobID, again.Attempt)
	}
	if err := again.Done(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Next(ctx, 700*time.Millisecond); err != queue.ErrNoJob {
		t.Errorf("Next after ack = %v, want ErrNoJob", err)
	}
}

// TestKeepAliveHoldsTheJob: a job kept alive past AckWait is not handed
// to anyone else.
func TestKeepAliveHoldsTheJob(t *testing.T) {
	ctx := context.Background()
	q := open(t, queue.Config{Capacity: 10, AckWait: 300 * time.Millisecond})
	q.Enqueue(ctx, "job_k", nil)
	d := next(t, q)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				d.KeepAlive()
			}
		}
	}()
	_, err := q.Next(ctx, time.Second)
	close(stop)
	<-done
	if err != queue.ErrNoJob {
		t.Errorf("Next while the job is kept alive = %v, want ErrNoJob", err)
	}
	d.Done(ctx)
}

// TestEventsResume: event sequences are resumable ids; Events delivers
// one thing's events only, with their payloads as published.
func TestEventsResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := open(t, queue.Config{})
	pub := []queue.Envelope{
		env("job", "job_e", "status", `{"status":"queued"}`),
		env("job", "job_other", "status", `{"status":"queued"}`),
		env("task", "job_e", "status", `{"a job and a task may share an id":true}`),
		env("job", "job_e", "status", `{"status":"running"}`),
		env("job", "job_e", "stdout", `{"data":"aGVsbG//"}`),
		env("job", "job_e", "end", ``),
	}
	for _, ev := range pub {
		if err := q.Send(ev); err != nil {
			t.Fatal(err)
		}
	}
	q.Flush(ctx)
	read := func(after uint64) []queue.Sequenced {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		ch, err := q.Events(sctx, "job", "job_e", after)
		if err != nil {
			t.Fatal(err)
		}
		var out []queue.Sequenced
		for ev := range ch {
			out = append(out, ev)
			if ev.Type == "end" {
				break
			}
		}
		return out
	}
	all := read(0)
	var got []string
	for _, ev := range all {
		got = append(got, ev.Kind+" "+ev.ID+" "+ev.Type+" "+string(ev.Payload))
	}
	want := []string{`job job_e status {"status":"queued"}`, `job job_e status {"status":"running"}`, `job job_e stdout {"data":"aGVsbG//"}`, "job job_e end "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events of job job_e (-want +got):\n%s", diff)
	}
	resumed := read(all[1].Seq)
	if len(resumed) != 2 || resumed[0].Seq != all[2].Seq {
		t.Errorf("resume after %d = %d events starting at %d, want 2 starting at %d", all[1].Seq, len(resumed), resumed[0].Seq, all[2].Seq)
	}
}

// TestCancelReachesSubscribers: cancel requests are heard by every
// subscriber (every worker process).
func TestCancelReachesSubscribers(t *testing.T) {
	q := open(t, queue.Config{})
	got := make(chan string, 2)
	for range 2 {
		stop, err := q.OnCancel(func(id string) { got <- id })
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	q.Conn().Flush()
	if err := q.Cancel("job_c"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case id := <-got:
			if id != "job_c" {
				t.Errorf("cancel for %q, want job_c", id)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a subscriber never heard the cancel")
		}
	}
}

// TestQueueSurvivesRestart: queued jobs are in the file store and are
// delivered after the embedded server restarts on the same directory.
func TestQueueSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q, err := queue.Open(ctx, queue.Config{StoreDir: dir, Capacity: 5})
	if err != nil {
		t.Fatal(err)
	}
	q.Enqueue(ctx, "job_1", []byte("one"))
	q.Enqueue(ctx, "job_2", []byte("two"))
	q.Close()
	q = open(t, queue.Config{StoreDir: dir, Capacity: 5})
	if n, _ := q.Depth(ctx); n != 2 {
		t.Fatalf("Depth after restart = %d, want 2", n)
	}
	if d := next(t, q); d.JobID != "job_1" || string(d.Payload) != "one" {
		t.Errorf("first after restart = %s %q, want job_1 one", d.JobID, d.Payload)
	}
}

// TestJoinKeepsCapacity: a worker joining over the network binds the
// existing streams and never changes the capacity.
func TestJoinKeepsCapacity(t *testing.T) {
	ctx := context.Background()
	if _, err := queue.Open(ctx, queue.Config{Join: true}); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("Join without a URL = %v, want %s", err, job.CodeInvalidRequest)
	}
	api := open(t, queue.Config{Capacity: 2, Listen: "127.0.0.1:-1", Token: "s3cret"})
	url := api.Conn().ConnectedUrl()
	w := open(t, queue.Config{URL: url, Join: true, Token: "s3cret"})
	if w.Capacity() != 2 {
		t.Errorf("joined Capacity = %d, want 2", w.Capacity())
	}
	api.Enqueue(ctx, "job_j", []byte("j"))
	if d := next(t, w); d.JobID != "job_j" {
		t.Errorf("worker got %s, want job_j", d.JobID)
	}
}

// TestTokenGuardsTheListener: with a token, an exposed embedded server
// refuses clients that do not present it.
func TestTokenGuardsTheListener(t *testing.T) {
	ctx := context.Background()
	api := open(t, queue.Config{Capacity: 2, Listen: "127.0.0.1:-1", Token: "s3cret"})
	url := api.Conn().ConnectedUrl()
	if q, err := queue.Open(ctx, queue.Config{URL: url, Join: true}); err == nil {
		q.Close()
		t.Fatal("a worker without the token joined")
	}
	if q, err := queue.Open(ctx, queue.Config{URL: url, Join: true, Token: "wrong"}); err == nil {
		q.Close()
		t.Fatal("a worker with a wrong token joined")
	}
	w := open(t, queue.Config{URL: url, Join: true, Token: "s3cret"})
	api.Enqueue(ctx, "job_t", nil)
	if d := next(t, w); d.JobID != "job_t" {
		t.Errorf("worker got %s, want job_t", d.JobID)
	}
}

// TestEventsAreBoundedPerJob: a chatty job keeps only its last
// MaxEventsPerJob events and does not push out another job's.
func TestEventsAreBoundedPerJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := open(t, queue.Config{})
	q.Send(env("job", "job_quiet", "end", ""))
	for range queue.MaxEventsPerJob + 5 {
		q.Send(env("job", "job_chatty", "stdout", `{"data":"AA=="}`))
	}
	q.Send(env("job", "job_chatty", "end", ""))
	q.Flush(ctx)
	count := func(id string) int {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		ch, err := q.Events(sctx, "job", id, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ev := range ch {
			n++
			if ev.Type == "end" {
				break
			}
		}
		return n
	}
	if got := count("job_chatty"); got != queue.MaxEventsPerJob {
		t.Errorf("job_chatty replays %d events, want %d", got, queue.MaxEventsPerJob)
	}
	if got := count("job_quiet"); got != 1 {
		t.Errorf("job_quiet replays %d events, want 1", got)
	}
}
