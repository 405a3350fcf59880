package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/remote"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"

	_ "github.com/agent-runner/agent-runner/backend/localprocess"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"),
		goleak.IgnoreTopFunction("time.Sleep"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats.go.(*Conn).flusher"),
	)
}

// rig is an API node (runner, store A, embedded queue, Mirror) and a
// worker's store B publishing to it.
type rig struct {
	api    *runner.Runner
	q      *queue.Queue
	worker *store.Store
	pub    *remote.Publisher
}

func newRig(t *testing.T, lim remote.Limits) *rig {
	t.Helper()
	dir := t.TempDir()
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "a"), DefaultBackend: "local_process"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Store().Close() })
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: r.Store().Dir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := remote.MirrorJobs(ctx, r, q, lim, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		time.Sleep(50 * time.Millisecond) // the mirror's consumer stops
		q.Close()
	})
	b, err := store.Open(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	pub, err := remote.NewPublisher(context.Background(), q.Conn(), remote.PublisherConfig{MaxBytes: lim.MaxBytes, Worker: testWorker})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{api: r, q: q, worker: b, pub: pub}
}

// accept records id on the API node as a queued job.
func (g *rig) accept(t *testing.T, id string) job.Request {
	t.Helper()
	req := job.Request{JobID: id, Workspace: job.Workspace{Path: t.TempDir()}, Command: job.Command{Argv: []string{"true"}},
		Policy: job.Policy{AllowedCommands: []job.CommandRule{{Basename: "true"}}}}
	if err := g.api.Prepare(&req); err != nil {
		t.Fatal(err)
	}
	if _, err := g.api.Store().Claim(req, store.StatusRecord{JobID: id, Status: job.StatusQueued}); err != nil {
		t.Fatal(err)
	}
	claim(t, g.q, testWorker, "job", id)
	return req
}

// testWorker is the identity the rigs' publishers have.
const testWorker = "wtest"

// claim writes worker's claim of kind's id, as the API node's queue does
// when the server delivers it to that worker.
func claim(t *testing.T, q *queue.Queue, worker, kind, id string) {
	t.Helper()
	js, _ := jetstream.New(q.Conn())
	if _, err := js.Publish(context.Background(), queue.ClaimsPrefix+worker+"."+kind+"."+id, []byte(`{"attempt":1}`)); err != nil {
		t.Fatal(err)
	}
}

// record writes a finished record of req into the worker's store.
func (g *rig) record(t *testing.T, req job.Request, files map[string][]byte) job.Result {
	t.Helper()
	st := g.worker
	if err := st.Create(req.JobID); err != nil {
		t.Fatal(err)
	}
	dir := st.RunDir(req.JobID)
	for p, b := range files {
		path := filepath.Join(dir, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := job.Result{JobID: req.JobID, Status: job.StatusCompleted, Attempt: 2, Backend: "local_process",
		Stdout: job.Output{Text: string(files["stdout.txt"])}, Artifacts: []job.Artifact{}}
	if err := st.WriteRequest(req); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteResult(res); err != nil {
		t.Fatal(err)
	}
	return res
}

// waitResult waits for the API node's result of id.
func (g *rig) waitResult(t *testing.T, id string) job.Result {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := g.api.Store().ReadResult(id); err == nil {
			return res
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no result for %s on the API node", id)
	return job.Result{}
}

func (g *rig) objects(t *testing.T) int {
	t.Helper()
	js, _ := jetstream.New(g.q.Conn())
	obs, err := js.ObjectStore(context.Background(), remote.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	list, err := obs.List(context.Background())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

func TestRecordReachesTheAPIStore(t *testing.T) {
	g := newRig(t, remote.Limits{})
	req := g.accept(t, "job_r1")
	big := bytes.Repeat([]byte("0123456789abcdef"), 20<<10) // 320 KiB: an object, not inline
	files := map[string][]byte{
		"stdout.txt":          []byte("hello\n"),
		"stderr.txt":          {},
		"egress.jsonl":        []byte("{}\n"),
		"artifacts/out.txt":   []byte("artifact"),
		"artifacts/d/big.bin": big,
		"snapshot/secret":     []byte("stays on the worker"),
		"snapshot.json":       []byte("{}"),
	}
	want := g.record(t, req, files)
	if err := g.pub.Publish(context.Background(), remote.Jobs, req.JobID, 2, g.worker.RunDir(req.JobID)); err != nil {
		t.Fatal(err)
	}
	got := g.waitResult(t, req.JobID)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mirrored result (-want +got):\n%s", diff)
	}
	dir := g.api.Store().RunDir(req.JobID)
	for p, b := range files {
		gotB, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		carried := p != "snapshot/secret" && p != "snapshot.json"
		if carried && (err != nil || !bytes.Equal(gotB, b)) {
			t.Errorf("%s on the API node = %d bytes, %v; want the worker's %d bytes", p, len(gotB), err, len(b))
		}
		if !carried && err == nil {
			t.Errorf("%s reached the API node; want it left on the worker", p)
		}
	}
	rec, err := g.api.Store().ReadStatus(req.JobID)
	if err != nil || rec.Status != job.StatusCompleted || rec.Attempt != 2 {
		t.Errorf("status.json = %+v, %v; want completed, attempt 2", rec, err)
	}
	// The stored request is the API node's: never replaced.
	if stored, _ := g.api.Store().ReadRequest(req.JobID); stored.JobID != req.JobID {
		t.Errorf("request.json = %+v", stored)
	}
	waitFor(t, "objects deleted", func() bool { return g.objects(t) == 0 })
}

func TestResultAlreadyThereIsKept(t *testing.T) {
	g := newRig(t, remote.Limits{})
	req := g.accept(t, "job_r2")
	mine := job.Result{JobID: req.JobID, Status: job.StatusCanceled, Artifacts: []job.Artifact{}}
	if err := g.api.Store().WriteResult(mine); err != nil {
		t.Fatal(err)
	}
	g.record(t, req, map[string][]byte{"stdout.txt": bytes.Repeat([]byte("x"), 100<<10)})
	if err := g.pub.Publish(context.Background(), remote.Jobs, req.JobID, 2, g.worker.RunDir(req.JobID)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "record acknowledged and objects deleted", func() bool { return g.pending(t) == 0 && g.objects(t) == 0 })
	got, err := g.api.Store().ReadResult(req.JobID)
	if err != nil || got.Status != job.StatusCanceled {
		t.Errorf("result = %+v, %v; want the API node's canceled result kept", got, err)
	}
	if _, err := os.Stat(filepath.Join(g.api.Store().RunDir(req.JobID), "stdout.txt")); err == nil {
		t.Error("stdout.txt was written beside a result that was already there")
	}
}

// TestRefusedRecordEndsTheJob publishes manifests a worker could forge:
// nothing lands outside the record, and the job ends with the reason
// instead of staying unfinished.
func TestRefusedRecordEndsTheJob(t *testing.T) {
	g := newRig(t, remote.Limits{MaxBytes: 1 << 20})
	js, _ := jetstream.New(g.q.Conn())
	sum := "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" // "hello"
	tests := []struct {
		id   string
		file remote.File
		want job.Code
	}{
		{"job_escape", remote.File{Path: "artifacts/../../../escaped", Size: 5, SHA256: sum, Inline: true, Data: []byte("hello")}, job.CodePathEscape},
		{"job_big", remote.File{Path: "artifacts/huge", Size: 2 << 20, SHA256: sum}, job.CodeRecordTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			g.accept(t, tt.id)
			m := remote.Manifest{Kind: "job", ID: tt.id, Attempt: 1, Files: []remote.File{tt.file,
				{Path: "result.json", Size: 5, SHA256: sum, Inline: true, Data: []byte("hello")}}}
			b, _ := json.Marshal(m)
			if _, err := js.Publish(context.Background(), "ar.records."+testWorker+".job."+tt.id, b); err != nil {
				t.Fatal(err)
			}
			res := g.waitResult(t, tt.id)
			if res.Status != job.StatusFailed || res.Error == nil || res.Error.Code != job.CodeRunIOFailed || res.Error.Details["reason"] != string(tt.want) {
				t.Errorf("result = %s %+v, want failed with %s, reason %s", res.Status, res.Error, job.CodeRunIOFailed, tt.want)
			}
			if _, err := os.Stat(filepath.Join(g.api.Store().Dir(), "escaped")); err == nil {
				t.Error("a record path escaped the run directory")
			}
		})
	}
}

func TestRunningStatusIsFollowed(t *testing.T) {
	g := newRig(t, remote.Limits{})
	req := g.accept(t, "job_r3")
	if err := g.q.Publish(job.EventKind, req.JobID, job.EventStatus, job.EventPayload{Status: job.StatusRunning, Attempt: 2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "status.json says running, attempt 2", func() bool {
		rec, err := g.api.Store().ReadStatus(req.JobID)
		return err == nil && rec.Status == job.StatusRunning && rec.Attempt == 2
	})
	// An older attempt's event does not move it back.
	g.q.Publish(job.EventKind, req.JobID, job.EventStatus, job.EventPayload{Status: job.StatusRunning, Attempt: 1})
	g.q.Publish(job.EventKind, req.JobID, job.EventStatus, job.EventPayload{Status: job.StatusFailed, Attempt: 2})
	time.Sleep(200 * time.Millisecond)
	rec, _ := g.api.Store().ReadStatus(req.JobID)
	if rec.Status != job.StatusRunning || rec.Attempt != 2 {
		t.Errorf("status.json = %s attempt %d, want running attempt 2 (terminal status waits for the record)", rec.Status, rec.Attempt)
	}
}

func TestOverCapFilesAreLeftOut(t *testing.T) {
	g := newRig(t, remote.Limits{MaxBytes: 64 << 10})
	req := g.accept(t, "job_r4")
	g.record(t, req, map[string][]byte{
		"stdout.txt":      []byte("fits"),
		"artifacts/large": bytes.Repeat([]byte("x"), 100<<10),
	})
	if err := g.pub.Publish(context.Background(), remote.Jobs, req.JobID, 1, g.worker.RunDir(req.JobID)); err != nil {
		t.Fatal(err)
	}
	if res := g.waitResult(t, req.JobID); res.Status != job.StatusCompleted {
		t.Errorf("result = %s, want the worker's completed result", res.Status)
	}
	dir := g.api.Store().RunDir(req.JobID)
	if _, err := os.Stat(filepath.Join(dir, "artifacts", "large")); err == nil {
		t.Error("a file over the record cap was carried")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "stdout.txt")); string(b) != "fits" {
		t.Errorf("stdout.txt = %q, %v; want %q", b, err, "fits")
	}
}

func (g *rig) pending(t *testing.T) uint64 {
	t.Helper()
	js, _ := jetstream.New(g.q.Conn())
	s, err := js.Stream(context.Background(), remote.RecordsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestJobsCarryTheEgressAudit: the job record carries the runner's egress
// audit (remote names the file without importing the runner).
func TestJobsCarryTheEgressAudit(t *testing.T) {
	if !slices.Contains(remote.Jobs.Files, runner.EgressFile) {
		t.Errorf("remote.Jobs.Files = %q, want %q among them", remote.Jobs.Files, runner.EgressFile)
	}
}
