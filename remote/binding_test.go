package remote_test

import (
	"context"
	"crypto/sha256"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/remote"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
)

// joined is a worker that joined the API node's listener with its own
// token: its queue, publisher and store.
type joined struct {
	q   *queue.Queue
	pub *remote.Publisher
	st  *store.Store
}

func join(t *testing.T, url, token string) joined {
	t.Helper()
	q, err := queue.Open(context.Background(), queue.Config{URL: url, Join: true, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	pub, err := remote.NewPublisher(context.Background(), q.Conn(), remote.PublisherConfig{Worker: q.WorkerID()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return joined{q: q, pub: pub, st: st}
}

// write records res (of req) in w's store.
func (w joined) write(t *testing.T, req job.Request, res job.Result) {
	t.Helper()
	if err := w.st.Create(req.JobID); err != nil {
		t.Fatal(err)
	}
	if err := w.st.WriteRequest(req); err != nil {
		t.Fatal(err)
	}
	if err := w.st.WriteResult(res); err != nil {
		t.Fatal(err)
	}
}

// TestRecordOnlyFromTheWorkerHoldingTheDelivery: worker B takes a job
// from the queue; worker A, with a credential of its own, forges a
// completed record for it. A cannot publish in B's name, nor claim the
// job; its record under its own name is refused and never ends or
// replaces anything. B's true record (failed) is the one stored.
func TestRecordOnlyFromTheWorkerHoldingTheDelivery(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "api"), DefaultBackend: "local_process"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Store().Close() })
	creds := []queue.Worker{{Name: "a", Hash: sha256.Sum256([]byte("token-a"))}, {Name: "b", Hash: sha256.Sum256([]byte("token-b"))}}
	q, err := queue.Open(ctx, queue.Config{StoreDir: r.Store().Dir(), Listen: "127.0.0.1:-1", Workers: creds, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	if err := remote.MirrorJobs(mctx, r, q, remote.Limits{}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		time.Sleep(50 * time.Millisecond)
		q.Close()
	})
	url := q.Conn().ConnectedUrl()
	a, b := join(t, url, "token-a"), join(t, url, "token-b")
	g := &rig{api: r, q: q}
	req := job.Request{JobID: "job_bound", Workspace: job.Workspace{Path: t.TempDir()}, Command: job.Command{Argv: []string{"true"}},
		Policy: job.Policy{AllowedCommands: []job.CommandRule{{Basename: "true"}}}}
	if err := r.Prepare(&req); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Store().Claim(req, store.StatusRecord{JobID: req.JobID, Status: job.StatusQueued}); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, req.JobID, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	d, err := b.q.Next(ctx, 5*time.Second)
	if err != nil || d.JobID != req.JobID {
		t.Fatalf("worker b took %q, %v; want %s", d.JobID, err, req.JobID)
	}

	// A forges: in its own name (allowed subject, refused record), in
	// B's name and as a claim (both denied by the server).
	a.write(t, req, job.Result{JobID: req.JobID, Status: job.StatusCompleted, Attempt: 1, Artifacts: []job.Artifact{}})
	if err := a.pub.Publish(ctx, remote.Jobs, req.JobID, 1, a.st.RunDir(req.JobID)); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(a.q.Conn())
	for _, subject := range []string{
		"ar.records." + b.q.WorkerID() + ".job." + req.JobID,
		queue.ClaimsPrefix + a.q.WorkerID() + ".job." + req.JobID,
	} {
		pctx, stop := context.WithTimeout(ctx, 2*time.Second)
		if _, err := js.Publish(pctx, subject, []byte(`{}`)); err == nil {
			t.Errorf("worker a published on %s", subject)
		}
		stop()
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := r.Store().ReadResult(req.JobID); err == nil {
		t.Fatal("the API node has a result before the worker holding the job sent one")
	}

	// B's true record.
	b.write(t, req, job.Result{JobID: req.JobID, Status: job.StatusFailed, Attempt: d.Attempt, Artifacts: []job.Artifact{},
		Error: job.Errorf(job.CodeRunExitNonzero, "exit 1")})
	if err := b.pub.Publish(ctx, remote.Jobs, req.JobID, d.Attempt, b.st.RunDir(req.JobID)); err != nil {
		t.Fatal(err)
	}
	if res := g.waitResult(t, req.JobID); res.Status != job.StatusFailed {
		t.Fatalf("result = %s, want b's failed", res.Status)
	}
	if err := d.Done(ctx); err != nil {
		t.Fatal(err)
	}
	// A's record is dropped after its tries; the result stays B's.
	deadline := time.Now().Add(20 * time.Second)
	for g.pending(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a's forged record was never dropped")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res, err := r.Store().ReadResult(req.JobID); err != nil || res.Status != job.StatusFailed {
		t.Errorf("result = %+v, %v; want b's failed result kept", res, err)
	}
	if rec, err := r.Store().ReadStatus(req.JobID); err != nil || rec.Status != job.StatusFailed {
		t.Errorf("status = %+v, %v; want failed", rec, err)
	}
}

// TestListenerRefusesAnonymousClients: a client with no credential is
// refused by the API node's loopback listener.
func TestListenerRefusesAnonymousClients(t *testing.T) {
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: t.TempDir(), Listen: "127.0.0.1:-1", Token: "shared-secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if nc, err := nats.Connect(q.Conn().ConnectedUrl(), nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected")
	}
}
