package taskremote_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/remote"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/taskevent"
	"github.com/agent-runner/agent-runner/task/taskremote"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"),
		goleak.IgnoreTopFunction("time.Sleep"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats.go.(*Conn).flusher"),
	)
}

// testWorker is the identity the rig's publisher has.
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

// taskRig is an API node's task store A (embedded queue, MirrorTasks) and
// a worker's task store B publishing to it.
type taskRig struct {
	api, worker string
	q           *queue.Queue
	pub         *remote.Publisher
	mu          sync.Mutex
	observed    []string // "from>to" the API node's observer heard
}

func newTaskRig(t *testing.T) *taskRig {
	t.Helper()
	dir := t.TempDir()
	g := &taskRig{api: filepath.Join(dir, "a", "tasks"), worker: filepath.Join(dir, "b", "tasks")}
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: filepath.Join(dir, "a")})
	if err != nil {
		t.Fatal(err)
	}
	g.q = q
	ctx, cancel := context.WithCancel(context.Background())
	obs := func(from state.State, rec state.Record) {
		g.mu.Lock()
		g.observed = append(g.observed, string(from)+">"+string(rec.State))
		g.mu.Unlock()
	}
	if err := taskremote.MirrorTasks(ctx, q, g.apiDir, obs, remote.Limits{MaxBytes: 8 << 20}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		time.Sleep(50 * time.Millisecond) // the mirror's consumer stops
		q.Close()
	})
	if g.pub, err = remote.NewPublisher(context.Background(), q.Conn(), remote.PublisherConfig{Worker: testWorker}); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *taskRig) apiDir(id string) string    { return filepath.Join(g.api, id) }
func (g *taskRig) workerDir(id string) string { return filepath.Join(g.worker, id) }

// submit records id on the API node as submitted: pending, with its
// manifest.
func (g *taskRig) submit(t *testing.T, id string) *state.Machine {
	t.Helper()
	m, err := state.Create(g.apiDir(id), id, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.apiDir(id), "manifest.yaml"), []byte("the API node's"), 0o644); err != nil {
		t.Fatal(err)
	}
	claim(t, g.q, testWorker, "task", id)
	return m
}

// run writes on the worker a task that went through the lifecycle to
// end, with files in its directory.
func (g *taskRig) run(t *testing.T, id string, end state.State, files map[string][]byte) {
	t.Helper()
	m, err := state.Create(g.workerDir(id), id, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []state.State{state.Staging, state.Provisioning, state.Ready, state.Running, state.Completing, end} {
		if err := m.Transition(s, "step", nil); err != nil {
			t.Fatal(err)
		}
		if s == end {
			break
		}
	}
	for p, b := range files {
		path := filepath.Join(g.workerDir(id), filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (g *taskRig) state(t *testing.T, id string) state.Record {
	t.Helper()
	m, err := state.Open(g.apiDir(id))
	if err != nil {
		t.Fatal(err)
	}
	return m.Current()
}

func (g *taskRig) waitState(t *testing.T, id string, want state.State) state.Record {
	t.Helper()
	waitFor(t, "task "+id+" "+string(want)+" on the API node", func() bool {
		m, err := state.Open(g.apiDir(id))
		return err == nil && m.Current().State == want
	})
	return g.state(t, id)
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (g *taskRig) drained(t *testing.T) func() bool {
	return func() bool {
		js, _ := jetstream.New(g.q.Conn())
		s, err := js.Stream(context.Background(), remote.RecordsStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	}
}

// TestTaskRecordReachesTheAPINode: a task that ran on a worker with its
// own store ends on the API node with the worker's state.json (replacing
// the pending one), logs, events and artifacts; the workspace stays on
// the worker; the API node's manifest is kept.
func TestTaskRecordReachesTheAPINode(t *testing.T) {
	g := newTaskRig(t)
	id := "t.one" // ids may hold dots
	g.submit(t, id)
	big := bytes.Repeat([]byte("0123456789abcdef"), 20<<10) // 320 KiB: an object, not inline
	files := map[string][]byte{
		"manifest.yaml":                     []byte("the worker's copy"),
		"outbox/progress/stdout.log":        []byte("hello\n"),
		"outbox/progress/stderr.log":        {},
		"outbox/artifacts/" + id + ".patch": big,
		"outbox/artifacts/metadata.json":    []byte(`{"state":"completed"}`),
		"inbox/TASK.md":                     []byte("the workspace stays on the worker"),
		"base.git/HEAD":                     []byte("ref: refs/heads/base"),
		"home/.profile":                     []byte("stays"),
	}
	g.run(t, id, state.Completed, files)
	if err := taskremote.PublishTask(g.pub, g.workerDir)(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	rec := g.waitState(t, id, state.Completed)
	wantRec, _ := state.Open(g.workerDir(id))
	if diff := cmp.Diff(wantRec.Current(), rec); diff != "" {
		t.Errorf("state.json on the API node (-worker +api):\n%s", diff)
	}
	for p, b := range files {
		got, err := os.ReadFile(filepath.Join(g.apiDir(id), filepath.FromSlash(p)))
		switch top := filepath.ToSlash(p)[:5]; top {
		case "outbo":
			if err != nil || !bytes.Equal(got, b) {
				t.Errorf("%s on the API node = %d bytes, %v; want the worker's %d bytes", p, len(got), err, len(b))
			}
		case "manif":
			if string(got) != "the API node's" {
				t.Errorf("manifest.yaml = %q, want the API node's kept", got)
			}
		default:
			if err == nil {
				t.Errorf("%s reached the API node; want it left on the worker", p)
			}
		}
	}
	want, _ := os.ReadFile(filepath.Join(g.workerDir(id), state.EventsFile))
	if got, _ := os.ReadFile(filepath.Join(g.apiDir(id), state.EventsFile)); !bytes.Equal(got, want) {
		t.Errorf("events.jsonl on the API node =\n%s\nwant the worker's\n%s", got, want)
	}
	waitFor(t, "record acknowledged", g.drained(t))
	g.mu.Lock()
	defer g.mu.Unlock()
	if diff := cmp.Diff([]string{"pending>completed"}, g.observed); diff != "" {
		t.Errorf("observed transitions (-want +got):\n%s", diff)
	}
}

// TestTerminalTaskStateIsKept: a task the API node already ended (a
// cancel that came first) keeps its state; nothing of the record lands.
func TestTerminalTaskStateIsKept(t *testing.T) {
	g := newTaskRig(t)
	m := g.submit(t, "t2")
	if err := m.Transition(state.Cancelled, "cancelled here", job.Errorf(job.CodeRunCanceled, "task was cancelled")); err != nil {
		t.Fatal(err)
	}
	g.run(t, "t2", state.Completed, map[string][]byte{"outbox/progress/stdout.log": []byte("late")})
	if err := taskremote.PublishTask(g.pub, g.workerDir)(context.Background(), "t2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "record acknowledged", g.drained(t))
	if rec := g.state(t, "t2"); rec.State != state.Cancelled {
		t.Errorf("state = %s, want the API node's cancelled kept", rec.State)
	}
	if _, err := os.Stat(filepath.Join(g.apiDir("t2"), "outbox", "progress", "stdout.log")); err == nil {
		t.Error("stdout.log was written beside a terminal state.json")
	}
}

// TestRefusedTaskRecordEndsTheTask publishes task manifests a worker
// could forge: nothing lands outside what a task record carries, a
// state.json that is not a terminal state of the task is refused, and the
// task ends failed with the reason instead of staying pending.
func TestRefusedTaskRecordEndsTheTask(t *testing.T) {
	g := newTaskRig(t)
	js, _ := jetstream.New(g.q.Conn())
	inline := func(p string, b []byte) remote.File {
		return remote.File{Path: p, Size: int64(len(b)), SHA256: sha(b), Inline: true, Data: b}
	}
	stateOf := func(id string, s state.State) []byte {
		b, _ := json.Marshal(state.Record{TaskID: id, State: s})
		return b
	}
	tests := []struct {
		id    string
		files []remote.File
		want  job.Code
	}{
		{"t-workspace", []remote.File{inline("inbox/x", []byte("x")), inline("state.json", stateOf("t-workspace", state.Completed))}, job.CodePathEscape},
		{"t-escape", []remote.File{inline("outbox/../../x", []byte("x")), inline("state.json", stateOf("t-escape", state.Completed))}, job.CodePathEscape},
		{"t-running", []remote.File{inline("state.json", stateOf("t-running", state.Running))}, job.CodeInvalidRequest},
		{"t-other", []remote.File{inline("state.json", stateOf("t-another", state.Completed))}, job.CodeInvalidRequest},
		{"t-garbage", []remote.File{inline("state.json", []byte("{"))}, job.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			g.submit(t, tt.id)
			b, _ := json.Marshal(remote.Manifest{Kind: "task", ID: tt.id, Files: tt.files})
			if _, err := js.Publish(context.Background(), "ar.records."+testWorker+".task."+tt.id, b); err != nil {
				t.Fatal(err)
			}
			rec := g.waitState(t, tt.id, state.Failed)
			if rec.Error == nil || rec.Error.Code != job.CodeRunIOFailed || rec.Error.Details["reason"] != string(tt.want) {
				t.Errorf("task ended %+v, want failed %s with reason %s", rec.Error, job.CodeRunIOFailed, tt.want)
			}
			for _, p := range []string{filepath.Join(g.apiDir(tt.id), "inbox"), filepath.Join(g.api, "x")} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
		})
	}
}

// TestTaskStatesAreFollowed: the worker's state events move the API
// node's task forward, one lifecycle step at a time, never backward, and
// never to a terminal state (that comes with the record).
func TestTaskStatesAreFollowed(t *testing.T) {
	g := newTaskRig(t)
	g.submit(t, "t3")
	publish := taskremote.TaskStates(g.q, nil)
	// Staging, provisioning and ready were missed: running is reached
	// through them.
	publish(state.Ready, state.Record{TaskID: "t3", State: state.Running})
	g.waitState(t, "t3", state.Running)
	publish(state.Pending, state.Record{TaskID: "t3", State: state.Staging})
	publish(state.Completing, state.Record{TaskID: "t3", State: state.Completed})
	publish(state.Pending, state.Record{TaskID: "unknown", State: state.Running})
	g.q.Flush(context.Background())
	time.Sleep(200 * time.Millisecond)
	rec := g.state(t, "t3")
	if rec.State != state.Running || rec.StartedAt == nil {
		t.Errorf("state = %s (started %v), want running (no step back, terminal left to the record)", rec.State, rec.StartedAt)
	}
	if _, err := os.Stat(g.apiDir("unknown")); err == nil {
		t.Error("an event for a task this node never recorded created it")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	want := []string{"pending>staging", "staging>provisioning", "provisioning>ready", "ready>running"}
	if diff := cmp.Diff(want, g.observed); diff != "" {
		t.Errorf("observed transitions (-want +got):\n%s", diff)
	}
}

// TestPublishTaskNeedsATerminalRecord: a delivery that left no record
// has nothing to carry; a task that is not terminal is not handed over
// (its message is delivered again).
func TestPublishTaskNeedsATerminalRecord(t *testing.T) {
	g := newTaskRig(t)
	publish := taskremote.PublishTask(g.pub, g.workerDir)
	if err := publish(context.Background(), "never-recorded"); err != nil {
		t.Errorf("PublishTask(no record) = %v, want nil", err)
	}
	g.run(t, "t4", state.Running, nil)
	if err := publish(context.Background(), "t4"); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("PublishTask(running) = %v, want %s", err, job.CodeInvalidRequest)
	}
	if !g.drained(t)() {
		t.Error("a record was published")
	}
}

// TestLiveOutputIsAppendedAndAnnounced: a chunk a worker publishes of a
// task recorded on the API node is appended to its progress log there,
// and the API node then says so (task_recorded), which wakes the task's
// streams; a chunk of a task staged on this node (a worker sharing the
// store writes its log itself) is neither appended nor announced.
func TestLiveOutputIsAppendedAndAnnounced(t *testing.T) {
	g := newTaskRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range []string{"t6", "t6-staged-here"} {
		g.submit(t, id)
		if err := os.MkdirAll(filepath.Join(g.apiDir(id), "outbox", "progress"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(g.apiDir("t6-staged-here"), "inbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	last, err := g.q.LastEventSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := g.q.AllEvents(ctx, last, func(e queue.Envelope) bool { return e.Type == taskevent.TypeRecorded })
	if err != nil {
		t.Fatal(err)
	}
	output := taskremote.TaskOutput(g.q)
	output("t6", "stdout", []byte("first\n"))
	output("t6-staged-here", "stdout", []byte("not here\n"))
	output("t6", "stderr", []byte("second\n"))
	var got []string
	for len(got) < 2 {
		select {
		case ev := <-recorded:
			got = append(got, ev.ID+" "+string(ev.Payload))
		case <-ctx.Done():
			t.Fatalf("recorded events so far %q", got)
		}
	}
	want := []string{`t6 {"task_id":"t6","record":"stdout"}`, `t6 {"task_id":"t6","record":"stderr"}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("task_recorded events (-want +got):\n%s", diff)
	}
	for name, want := range map[string]string{"stdout.log": "first\n", "stderr.log": "second\n"} {
		if b, _ := os.ReadFile(filepath.Join(g.apiDir("t6"), "outbox", "progress", name)); string(b) != want {
			t.Errorf("%s on the API node = %q, want %q", name, b, want)
		}
	}
	if _, err := os.Stat(filepath.Join(g.apiDir("t6-staged-here"), "outbox", "progress", "stdout.log")); err == nil {
		t.Error("a chunk of a task staged here was appended")
	}
}
