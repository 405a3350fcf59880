package sessionremote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/door/sessionapi/sessionremote"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"),
		goleak.IgnoreTopFunction("time.Sleep"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats.go.(*Conn).flusher"),
	)
}

// natsServer starts an embedded NATS server without a listener.
func natsServer(t *testing.T) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{DontListen: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func connect(t *testing.T, ns *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL(), nats.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// service is a session service on local_process over a fresh store,
// keeping at most max sandboxes; edit, when set, changes its config.
func service(t *testing.T, max int, edit func(*session.Config)) *session.Service {
	t.Helper()
	set := backend.Set{"local_process": localprocess.Backend{}}
	dir := t.TempDir()
	r, err := runner.New(runner.Config{StoreDir: dir, DefaultBackend: "local_process", Backends: set})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := store.OpenRecords(filepath.Join(dir, store.Sessions.Dir), store.Sessions)
	if err != nil {
		t.Fatal(err)
	}
	cfg := session.Config{Runner: r, Records: recs, Backends: set, DefaultBackend: "local_process",
		UnsafeLocalProcess: true, MaxSandboxes: max}
	if edit != nil {
		edit(&cfg)
	}
	s, err := session.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// apiNode is a router over its own service (hosting no sandboxes) and
// an HTTP server of the sessions routes through it.
func apiNode(t *testing.T, ns *server.Server) (*httptest.Server, *sessionremote.Router, *session.Service) {
	t.Helper()
	return apiNodeWith(t, ns, sessionremote.RouterConfig{})
}

// apiNodeWith is apiNode with cfg's Local and LocalBackends; its own
// service keeps one sandbox at most.
func apiNodeWith(t *testing.T, ns *server.Server, cfg sessionremote.RouterConfig) (*httptest.Server, *sessionremote.Router, *session.Service) {
	t.Helper()
	return apiNodeOver(t, ns, cfg, service(t, 1, nil))
}

// apiNodeOver is apiNodeWith over svc.
func apiNodeOver(t *testing.T, ns *server.Server, cfg sessionremote.RouterConfig, svc *session.Service) (*httptest.Server, *sessionremote.Router, *session.Service) {
	t.Helper()
	cfg.Conn, cfg.Service, cfg.LostAfter = connect(t, ns), svc, 2*time.Second
	r, err := sessionremote.NewRouter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; r.Close() })
	mux := http.NewServeMux()
	sessionapi.Routes(mux, svc, func(_ string, h http.Handler) http.Handler { return r.Wrap(h) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, r, svc
}

// host runs a worker's host with its own service (at most max
// sandboxes) on its own NATS connection; stop ends it and closes that
// connection.
func host(t *testing.T, ns *server.Server, worker string, max int, door func(*session.Service) http.Handler) (stop func()) {
	t.Helper()
	nc := connect(t, ns)
	h := sessionremote.NewHost(nc, worker, nil)
	svc := service(t, max, func(cfg *session.Config) { cfg.Saved, cfg.Events = h.Saved, h })
	if door == nil {
		door = func(svc *session.Service) http.Handler {
			mux := http.NewServeMux()
			sessionapi.Routes(mux, svc, func(_ string, h http.Handler) http.Handler { return h })
			return mux
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx, svc, door(svc), []string{"local_process"}); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			nc.Close()
		}
	}
	t.Cleanup(stop)
	return stop
}

// call sends method path with body and decodes the JSON answer.
func call(t *testing.T, srv *httptest.Server, method, path, body string, header http.Header) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func errOf(out map[string]any) job.Code {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return job.Code(c)
}

// TestPlacementHoldsCapacity: creates go to the workers with room, each
// within its maximum, and one more is session.limit_reached; each
// sandbox runs on the worker that holds it.
func TestPlacementHoldsCapacity(t *testing.T) {
	ns := natsServer(t)
	srv, r, _ := apiNode(t, ns)
	host(t, ns, "wa", 1, nil)
	host(t, ns, "wb", 2, nil)
	waitHeard(t, r, 2)
	perWorker := map[string]int{}
	for _, id := range []string{"s1", "s2", "s3"} {
		status, out := call(t, srv, "POST", "/v1/sandboxes", `{"id": "`+id+`"}`, nil)
		if status != http.StatusCreated {
			t.Fatalf("create %s = %d %v", id, status, out)
		}
		w, _ := out["worker"].(string)
		perWorker[strings.SplitN(w, ".", 2)[0]]++
		status, out = call(t, srv, "POST", "/v1/sandboxes/"+id+"/exec", `{"argv": ["echo", "`+id+`"]}`, nil)
		if status != http.StatusOK || out["stdout"] != id+"\n" {
			t.Errorf("exec in %s = %d %v", id, status, out)
		}
	}
	if perWorker["wa"] != 1 || perWorker["wb"] != 2 {
		t.Errorf("placed per worker = %v, want wa 1 and wb 2", perWorker)
	}
	status, out := call(t, srv, "POST", "/v1/sandboxes", `{"id": "s4"}`, nil)
	if status != http.StatusTooManyRequests || errOf(out) != job.CodeSessionLimit {
		t.Errorf("create beyond every worker's room = %d %v, want 429 %s", status, out, job.CodeSessionLimit)
	}
	if status, out := call(t, srv, "GET", "/v1/sandboxes/s4", "", nil); status != http.StatusNotFound {
		t.Errorf("the refused create left a record: %d %v", status, out)
	}
}

// waitHeard waits until r heard n workers.
func waitHeard(t *testing.T, r *sessionremote.Router, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(r.Workers()) < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("heard %d workers, want %d", len(r.Workers()), n)
		}
	}
}

// TestForwarding: a forwarded call reaches the worker without the
// caller's token (its cookies go on), a record answer names the worker, and a
// streamed answer arrives as the worker flushes it, not when it ends.
func TestForwarding(t *testing.T) {
	ns := natsServer(t)
	srv, r, _ := apiNode(t, ns)
	release := make(chan struct{})
	host(t, ns, "wa", 4, func(*session.Service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if strings.HasSuffix(req.URL.Path, "/events") {
				w.Write([]byte("first\n"))
				w.(http.Flusher).Flush()
				<-release
				w.Write([]byte("second\n"))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]string{"id": "fwd", "state": "running", "authorization": req.Header.Get("Authorization"), "cookie": req.Header.Get("Cookie")})
		})
	})
	waitHeard(t, r, 1)
	status, out := call(t, srv, "POST", "/v1/sandboxes", `{"id": "fwd"}`, http.Header{"Authorization": {"Bearer caller-secret"}, "Cookie": {"c=1"}})
	if status != http.StatusCreated {
		t.Fatalf("create = %d %v", status, out)
	}
	if out["authorization"] != "" {
		t.Errorf("the worker saw the caller's token: %v", out)
	}
	if out["cookie"] != "c=1" {
		t.Errorf("the worker got cookie %q, want the caller's (a sandbox's server gets them)", out["cookie"])
	}
	if w, _ := out["worker"].(string); !strings.HasPrefix(w, "wa.") {
		t.Errorf("record answer's worker = %q, want wa's instance", out["worker"])
	}
	resp, err := http.Get(srv.URL + "/v1/sandboxes/fwd/processes/1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len("first\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first\n" {
		t.Fatalf("first chunk = %q, %v (the stream was held back)", first, err)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "second\n" {
		t.Errorf("rest = %q", rest)
	}
}

// TestLostWorker: when a worker's heartbeats stop, its sandboxes end
// failed with session.worker_lost and calls for them answer that code;
// get and delete answer the record.
func TestLostWorker(t *testing.T) {
	ns := natsServer(t)
	srv, r, _ := apiNode(t, ns)
	stop := host(t, ns, "wa", 4, nil)
	waitHeard(t, r, 1)
	if status, out := call(t, srv, "POST", "/v1/sandboxes", `{"id": "doomed"}`, nil); status != http.StatusCreated {
		t.Fatalf("create = %d %v", status, out)
	}
	stop()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, out := call(t, srv, "GET", "/v1/sandboxes/doomed", "", nil)
		if out["state"] == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox of a lost worker = %v, want failed", out)
		}
	}
	status, out := call(t, srv, "POST", "/v1/sandboxes/doomed/exec", `{"argv": ["true"]}`, nil)
	if status != http.StatusGone || errOf(out) != job.CodeSessionWorkerLost {
		t.Errorf("exec = %d %v, want 410 %s", status, out, job.CodeSessionWorkerLost)
	}
	status, out = call(t, srv, "DELETE", "/v1/sandboxes/doomed", "", nil)
	if e, _ := out["error"].(map[string]any); status != http.StatusOK || out["state"] != "failed" || e["code"] != string(job.CodeSessionWorkerLost) {
		t.Errorf("delete = %d %v, want the failed record", status, out)
	}
}

// TestLostWorkerHeardAgainIsTold: a worker declared lost that beats
// again is told so (it then ends its sandboxes and comes back as a new
// instance), and is not placed on.
func TestLostWorkerHeardAgainIsTold(t *testing.T) {
	ns := natsServer(t)
	srv, r, _ := apiNode(t, ns)
	nc := connect(t, ns)
	told := make(chan struct{}, 1)
	if _, err := nc.Subscribe("ar.sandboxes.to.ghost.i1.lost", func(*nats.Msg) { told <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	beat := func() {
		nc.Publish("ar.sandboxes.from.ghost.i1.beat", []byte(`{"live": 0, "max": 4, "backends": ["local_process"]}`))
	}
	beat()
	waitHeard(t, r, 1)
	for deadline := time.Now().Add(20 * time.Second); !r.Workers()[0].Lost; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a silent worker was never lost")
		}
	}
	beat()
	<-told
	status, out := call(t, srv, "POST", "/v1/sandboxes", `{"id": "x"}`, nil)
	if status != http.StatusTooManyRequests || errOf(out) != job.CodeSessionLimit {
		t.Errorf("create with only a lost worker = %d %v, want 429 %s", status, out, job.CodeSessionLimit)
	}
}

// TestPlacedWorkerNeverHeardIsLost: after an API node restart, a
// sandbox whose worker is not heard within LostAfter ends failed with
// session.worker_lost.
func TestPlacedWorkerNeverHeardIsLost(t *testing.T) {
	ns := natsServer(t)
	_, _, svc := apiNode(t, ns)
	if _, _, err := svc.Place(session.CreateRequest{ID: "orphan"}, "ghost.i1"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rec, err := svc.Get("orphan")
		if err != nil {
			t.Fatal(err)
		}
		if rec.State == session.StateFailed {
			if rec.Error == nil || rec.Error.Code != job.CodeSessionWorkerLost {
				t.Errorf("orphan's error = %+v, want %s", rec.Error, job.CodeSessionWorkerLost)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan = %s, want failed", rec.State)
		}
	}
}

// TestPlacementCountsThisNode: serve hosting sandboxes is one host: the
// first create stays here (a tie), the next goes to the worker with
// room, and the sandbox here is served here.
func TestPlacementCountsThisNode(t *testing.T) {
	ns := natsServer(t)
	srv, r, svc := apiNodeWith(t, ns, sessionremote.RouterConfig{Local: true, LocalBackends: []string{"local_process"}})
	host(t, ns, "wa", 1, nil)
	waitHeard(t, r, 1)
	for _, want := range []struct{ id, worker string }{{"here", ""}, {"there", "wa."}} {
		status, out := call(t, srv, "POST", "/v1/sandboxes", `{"id": "`+want.id+`"}`, nil)
		w, _ := out["worker"].(string)
		if status != http.StatusCreated || !strings.HasPrefix(w, want.worker) || (want.worker == "") != (w == "") {
			t.Errorf("create %s = %d, worker %q; want 201 on %q", want.id, status, w, want.worker)
		}
	}
	if live, _ := svc.Load(); live != 1 {
		t.Errorf("sandboxes here = %d, want 1", live)
	}
	status, out := call(t, srv, "POST", "/v1/sandboxes/here/exec", `{"argv": ["echo", "local"]}`, nil)
	if status != http.StatusOK || out["stdout"] != "local\n" {
		t.Errorf("exec here = %d %v", status, out)
	}
	if status, _ := call(t, srv, "POST", "/v1/sandboxes", `{"id": "third"}`, nil); status != http.StatusTooManyRequests {
		t.Errorf("a third create = %d, want 429", status)
	}
}

// TestRunClaims: the run an exec on a worker answered is claimed for
// that worker (so its record is accepted from it), but only a run id of
// that sandbox and kind: a worker cannot get another record's id bound
// to it.
func TestRunClaims(t *testing.T) {
	ns := natsServer(t)
	claims := make(chan string, 8)
	srv, r, _ := apiNodeWith(t, ns, sessionremote.RouterConfig{Claim: func(_ context.Context, worker, runID string) error {
		claims <- worker + " " + runID
		return nil
	}})
	host(t, ns, "wa", 4, func(*session.Service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if req.Method == http.MethodPost && req.URL.Path == "/v1/sandboxes" {
				w.WriteHeader(http.StatusCreated)
				w.Write([]byte(`{"id": "box", "state": "running"}`))
				return
			}
			var ask struct {
				Argv []string `json:"argv"`
			}
			json.NewDecoder(req.Body).Decode(&ask)
			json.NewEncoder(w).Encode(map[string]string{"run_id": ask.Argv[0]})
		})
	})
	waitHeard(t, r, 1)
	if status, out := call(t, srv, "POST", "/v1/sandboxes", `{"id": "box"}`, nil); status != http.StatusCreated {
		t.Fatalf("create = %d %v", status, out)
	}
	for _, runID := range []string{"job_victim", "box.proc-1", "other.exec-1", "box.exec-1x", "box.exec-2"} {
		status, out := call(t, srv, "POST", "/v1/sandboxes/box/exec", `{"argv": ["`+runID+`"]}`, nil)
		if status != http.StatusOK || out["run_id"] != runID {
			t.Errorf("exec answering %s = %d %v, want it passed on", runID, status, out)
		}
	}
	// Claims are written before the answer is passed on, in order: the
	// last exec's is the first and only one.
	if got := <-claims; got != "wa box.exec-2" {
		t.Errorf("claim = %q, want %q", got, "wa box.exec-2")
	}
	select {
	case got := <-claims:
		t.Errorf("another claim: %q", got)
	default:
	}
}

// TestEventsServedHere: a placed sandbox's own events stream is served
// by the API node (it reads this node's bus), never forwarded to the
// worker: here the API node's service has no bus, so it answers
// queue.closed itself.
func TestEventsServedHere(t *testing.T) {
	ns := natsServer(t)
	srv, r, _ := apiNode(t, ns)
	host(t, ns, "wa", 4, func(svc *session.Service) http.Handler {
		mux := http.NewServeMux()
		sessionapi.Routes(mux, svc, func(_ string, h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				if req.Pattern == sessionapi.EventsPattern {
					http.Error(w, "from the worker", http.StatusTeapot)
					return
				}
				h.ServeHTTP(w, req)
			})
		})
		return mux
	})
	waitHeard(t, r, 1)
	if status, out := call(t, srv, "POST", "/v1/sandboxes", `{"id": "here"}`, nil); status != http.StatusCreated {
		t.Fatalf("create = %d %v", status, out)
	}
	if _, out := call(t, srv, "GET", "/v1/sandboxes/here", "", nil); !strings.HasPrefix(fmt.Sprint(out["worker"]), "wa.") {
		t.Fatalf("sandbox = %v, want it on wa", out)
	}
	status, out := call(t, srv, "GET", "/v1/sandboxes/here/events", "", nil)
	if status == http.StatusTeapot || errOf(out) != job.CodeQueueClosed {
		t.Errorf("events = %d %v, want the API node's own answer, %s", status, out, job.CodeQueueClosed)
	}
}

// TestRunEventsRelayed: a placed sandbox's own stream on the API node
// has its state changes (from the records the worker sends) and its
// runs' status events (which the worker sends and the API node
// publishes); a run event a worker sends of a sandbox not placed on it
// is refused.
func TestRunEventsRelayed(t *testing.T) {
	ns := natsServer(t)
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	bus := service(t, 1, func(cfg *session.Config) { cfg.Events, cfg.Feed = q, q })
	srv, r, svc := apiNodeOver(t, ns, sessionremote.RouterConfig{}, bus)
	host(t, ns, "wa", 4, nil)
	waitHeard(t, r, 1)
	if status, out := call(t, srv, "POST", "/v1/sandboxes", `{"id": "far"}`, nil); status != http.StatusCreated {
		t.Fatalf("create = %d %v", status, out)
	}
	if status, out := call(t, srv, "POST", "/v1/sandboxes/far/exec", `{"argv": ["true"]}`, nil); status != http.StatusOK {
		t.Fatalf("exec = %d %v", status, out)
	}
	// The run's events reach the API node's bus (after the exec's
	// answer: they travel apart from it).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errSeen := errors.New("seen")
	var runs []string
	err = svc.FollowEvents(ctx, "far", 0, func(ev session.StreamEvent) error {
		var p struct {
			RunID  string `json:"run_id"`
			Status string `json:"status"`
		}
		json.Unmarshal(ev.Payload, &p)
		if ev.Type == session.EventRun {
			runs = append(runs, p.RunID+" "+p.Status)
		}
		if p.Status == string(job.StatusCompleted) {
			return errSeen
		}
		return nil
	})
	if err != errSeen {
		t.Fatalf("FollowEvents = %v; runs %q", err, runs)
	}
	if diff := cmp.Diff([]string{"far.exec-1 running", "far.exec-1 completed"}, runs); diff != "" {
		t.Errorf("run events on the API node (-want +got):\n%s", diff)
	}
	if status, out := call(t, srv, "DELETE", "/v1/sandboxes/far", "", nil); status != http.StatusOK {
		t.Fatalf("delete = %d %v", status, out)
	}
	// Its stream ends with the state the worker's record says.
	var last session.Event
	if err := svc.FollowEvents(ctx, "far", 0, func(ev session.StreamEvent) error {
		if ev.Type == session.EventState {
			return json.Unmarshal(ev.Payload, &last)
		}
		return nil
	}); err != nil || last.State != session.StateStopped {
		t.Errorf("FollowEvents = %v, last state %q; want stopped, then the end", err, last.State)
	}
	wantErr := func(what string, err error, code job.Code) {
		t.Helper()
		if job.CodeOf(err) != code {
			t.Errorf("%s: %v, want %s", what, err, code)
		}
	}
	rec, _ := svc.Get("far")
	ev := session.RunEvent{SandboxID: "far", RunID: "far.exec-9", Run: session.RunExec, Status: job.StatusCompleted}
	wantErr("another worker", svc.RelayRun("wb.x", ev), job.CodeJobConflict)
	other := ev
	other.RunID = "elsewhere.exec-1"
	wantErr("another sandbox's run", svc.RelayRun(rec.Worker, other), job.CodeInvalidRequest)
	wantErr("its own", svc.RelayRun(rec.Worker, ev), "")
}
