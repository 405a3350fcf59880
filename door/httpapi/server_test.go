package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/door/httpapi"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/worker"

	_ "github.com/agent-runner/agent-runner/backend/localprocess"
)

type env struct {
	t     *testing.T
	url   string
	c     *client.Client
	r     *runner.Runner
	q     *queue.Queue
	api   *httpapi.Server
	ws    string
	start func() // starts the worker pool
}

type opts struct {
	capacity  int64
	noWorkers bool
	tokens    *auth.Tokens
	natsURL   string
	timeout   time.Duration
	keepAlive time.Duration
	// allowedHosts is Config.AllowedHosts (guard_test.go).
	allowedHosts []string
}

func newEnv(t *testing.T, o opts) *env {
	t.Helper()
	dir := t.TempDir()
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: "local_process", KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if o.capacity == 0 {
		o.capacity = 64
	}
	ctx, cancel := context.WithCancel(context.Background())
	q, err := queue.Open(ctx, queue.Config{URL: o.natsURL, StoreDir: r.Store().Dir(), Capacity: o.capacity, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Config{Runner: r, Queue: q, Tokens: o.tokens, RequestTimeout: o.timeout, KeepAlive: o.keepAlive, AllowedHosts: o.allowedHosts})
	srv := httptest.NewServer(api.Handler())
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "in.txt"), []byte("input\n"), 0o644)
	e := &env{t: t, url: srv.URL, c: client.New(srv.URL, ""), r: r, q: q, api: api, ws: ws}
	var poolDone chan struct{}
	e.start = func() {
		poolDone = make(chan struct{})
		m := api.Metrics()
		pool := worker.New(worker.Config{Workers: 2, Runner: r, Queue: q, Grace: 5 * time.Second,
			Started: func(req job.Request, _ int) { m.Started(req.Backend.Kind) },
			Result:  func(res job.Result) { m.Ran(res) }})
		go func() { pool.Run(ctx); close(poolDone) }()
	}
	if !o.noWorkers {
		e.start()
	}
	t.Cleanup(func() {
		cancel()
		if poolDone != nil {
			<-poolDone
		}
		srv.Close()
		q.Close()
	})
	return e
}

func (e *env) request(argv []string, allowed ...string) map[string]any {
	return map[string]any{
		"workspace": map[string]any{"path": e.ws},
		"command":   map[string]any{"argv": argv},
		"policy":    map[string]any{"allowed_commands": allowed},
		"limits":    map[string]any{"timeout_ms": 20000},
	}
}

func (e *env) post(body any, hdr ...string) (*http.Response, []byte) {
	e.t.Helper()
	var b []byte
	switch v := body.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		b, _ = json.Marshal(v)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/jobs", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

func (e *env) submit(body any) string {
	e.t.Helper()
	resp, out := e.post(body)
	if resp.StatusCode != http.StatusAccepted {
		e.t.Fatalf("POST /v1/jobs = %d %s, want 202", resp.StatusCode, out)
	}
	var acc httpapi.Accepted
	json.Unmarshal(out, &acc)
	if acc.Status != job.StatusQueued || !strings.HasPrefix(acc.JobID, "job_") {
		e.t.Fatalf("accepted = %+v", acc)
	}
	return acc.JobID
}

func (e *env) wait(id string) job.Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.c.Wait(ctx, id, 20*time.Millisecond)
	if err != nil {
		e.t.Fatalf("wait %s: %v", id, err)
	}
	return res
}

func get(t *testing.T, url string) (int, []byte, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func errCode(b []byte) job.Code {
	var e struct{ Error job.Error }
	json.Unmarshal(b, &e)
	return e.Error.Code
}

func TestHealthAndOpenAPI(t *testing.T) {
	e := newEnv(t, opts{})
	code, body, _ := get(t, e.url+"/health")
	if code != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Errorf("/health = %d %s", code, body)
	}
	code, body, _ = get(t, e.url+"/openapi.json")
	var doc map[string]any
	if code != 200 || json.Unmarshal(body, &doc) != nil || doc["openapi"] == nil {
		t.Errorf("/openapi.json = %d", code)
	}
}

func TestSubmitAndResult(t *testing.T) {
	e := newEnv(t, opts{})
	req := e.request([]string{"cat", "in.txt"}, "cat")
	req["trace"] = map[string]any{"agent_id": "a1", "custom": []int{1, 2}}
	id := e.submit(req)
	res := e.wait(id)
	if res.Status != job.StatusCompleted || res.Stdout.Text != "input\n" || res.Attempt != 1 {
		t.Errorf("result = %s %q attempt %d", res.Status, res.Stdout.Text, res.Attempt)
	}
	code, body, _ := get(t, e.url+"/v1/jobs/"+id)
	var full job.Result
	if code != 200 || json.Unmarshal(body, &full) != nil || full.Replay.ResultSHA256 != res.Replay.ResultSHA256 {
		t.Errorf("GET job = %d", code)
	}
	if !strings.Contains(string(body), `"custom": [`) {
		t.Errorf("trace not echoed: %s", body)
	}
}

func TestValidationAndErrors(t *testing.T) {
	e := newEnv(t, opts{})
	tests := []struct {
		name string
		body string
		code int
		want job.Code
	}{
		{"not JSON", "{nope", 422, job.CodeInvalidRequest},
		{"unknown field", `{"workspace":{"path":"` + e.ws + `"},"command":{"argv":["true"]},"extra":1}`, 422, job.CodeInvalidRequest},
		{"empty argv", `{"workspace":{"path":"` + e.ws + `"},"command":{"argv":[]}}`, 422, job.CodeInvalidRequest},
		{"cwd escape", `{"workspace":{"path":"` + e.ws + `"},"command":{"argv":["true"],"cwd":"../.."}}`, 422, job.CodePathEscape},
		{"limit over max", `{"workspace":{"path":"` + e.ws + `"},"command":{"argv":["true"]},"limits":{"timeout_ms":999999999999}}`, 422, job.CodeLimitExceeded},
		{"too large", `{"workspace":{"path":"` + strings.Repeat("x", 2<<20) + `"}}`, 413, job.CodeBodyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, out := e.post(tt.body)
			if resp.StatusCode != tt.code || errCode(out) != tt.want {
				t.Errorf("POST = %d %s, want %d %s", resp.StatusCode, out, tt.code, tt.want)
			}
		})
	}
	for _, path := range []string{"/v1/jobs/job_nope", "/v1/jobs/job_nope/artifacts", "/v1/jobs/job_nope/artifacts/x", "/v1/jobs/job_nope/events", "/v1/jobs/job_nope/egress"} {
		if code, body, _ := get(t, e.url+path); code != 404 || errCode(body) != job.CodeJobNotFound {
			t.Errorf("GET %s = %d %s, want 404", path, code, body)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, e.url+"/v1/jobs/job_nope", nil)
	if resp, _ := http.DefaultClient.Do(req); resp.StatusCode != 404 {
		t.Errorf("DELETE unknown = %d, want 404", resp.StatusCode)
	}
}

func TestPolicyDenialIsAResult(t *testing.T) {
	e := newEnv(t, opts{})
	id := e.submit(e.request([]string{"bash", "-c", "id"}, "bash"))
	res := e.wait(id)
	if res.Status != job.StatusPolicyDenied || res.Error.Code != job.CodeShellDenied {
		t.Errorf("result = %s %+v", res.Status, res.Error)
	}
}

func TestArtifacts(t *testing.T) {
	e := newEnv(t, opts{})
	req := e.request([]string{"python3", "-c", "import os; os.makedirs('out/sub', exist_ok=True); open('out/sub/r.txt','w').write('report')"}, "python3")
	req["policy"].(map[string]any)["artifact_globs"] = []string{"out/**"}
	id := e.submit(req)
	e.wait(id)
	code, body, _ := get(t, e.url+"/v1/jobs/"+id+"/artifacts")
	if code != 200 || !strings.Contains(string(body), "out/sub/r.txt") {
		t.Fatalf("artifacts = %d %s", code, body)
	}
	code, body, hdr := get(t, e.url+"/v1/jobs/"+id+"/artifacts/out/sub/r.txt")
	sum := sha256.Sum256([]byte("report"))
	if code != 200 || string(body) != "report" || hdr.Get("X-Content-SHA256") != hex.EncodeToString(sum[:]) {
		t.Errorf("download = %d %q sha %q", code, body, hdr.Get("X-Content-SHA256"))
	}
	for _, p := range []string{"out/../../request.json", "..%2Frequest.json", "out/sub/missing.txt"} {
		if code, _, _ := get(t, e.url+"/v1/jobs/"+id+"/artifacts/"+p); code != 404 {
			t.Errorf("download %q = %d, want 404", p, code)
		}
	}
}

// TestEgressRoute: GET /v1/jobs/{id}/egress answers the decisions in the
// job's run record, and an empty list for a job that made no connection.
func TestEgressRoute(t *testing.T) {
	e := newEnv(t, opts{})
	id := e.submit(e.request([]string{"true"}, "true"))
	e.wait(id)
	code, body, _ := get(t, e.url+"/v1/jobs/"+id+"/egress")
	var compact bytes.Buffer
	json.Compact(&compact, body)
	if got, want := compact.String(), `{"job_id":"`+id+`","decisions":[]}`; code != 200 || got != want {
		t.Errorf("egress of a job without connections = %d %s, want 200 %s", code, got, want)
	}
	log := egress.NewAuditLog(filepath.Join(e.r.Store().RunDir(id), runner.EgressFile))
	if err := log.Write(egress.Decision{Run: id, Host: "blocked.example", Port: 80, Mode: egress.ModeHTTP, Rule: egress.ReasonNotAllowed}); err != nil {
		t.Fatal(err)
	}
	log.Close()
	code, body, _ = get(t, e.url+"/v1/jobs/"+id+"/egress")
	var got struct {
		JobID     string            `json:"job_id"`
		Decisions []egress.Decision `json:"decisions"`
	}
	if err := json.Unmarshal(body, &got); code != 200 || err != nil {
		t.Fatalf("egress = %d %s", code, body)
	}
	if len(got.Decisions) != 1 || got.Decisions[0].Host != "blocked.example" || got.Decisions[0].Allowed {
		t.Errorf("egress decisions = %+v, want the one refusal of blocked.example", got.Decisions)
	}
}

func TestArtifactsOfRunningJob(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true})
	id := e.submit(e.request([]string{"true"}, "true"))
	if code, body, _ := get(t, e.url+"/v1/jobs/"+id+"/artifacts"); code != 409 || errCode(body) != job.CodeNotTerminal {
		t.Errorf("artifacts of a queued job = %d %s, want 409", code, body)
	}
	code, body, _ := get(t, e.url+"/v1/jobs/"+id)
	if code != 200 || !strings.Contains(string(body), `"queued"`) {
		t.Errorf("GET queued job = %d %s", code, body)
	}
}

func TestQueueFullLosesNothing(t *testing.T) {
	e := newEnv(t, opts{capacity: 3, noWorkers: true})
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, e.submit(e.request([]string{"echo", fmt.Sprint(i)}, "echo")))
	}
	resp, out := e.post(e.request([]string{"echo", "overflow"}, "echo"))
	if resp.StatusCode != 503 || errCode(out) != job.CodeQueueFull || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("4th submit = %d %s, want 503 queue.full", resp.StatusCode, out)
	}
	runs, _ := os.ReadDir(filepath.Join(e.r.Store().Dir(), "runs"))
	if len(runs) != 3 {
		t.Errorf("%d run records after a refused submit, want 3", len(runs))
	}
	e.start()
	for i, id := range ids {
		if res := e.wait(id); res.Status != job.StatusCompleted || res.Stdout.Text != fmt.Sprintf("%d\n", i) {
			t.Errorf("job %d = %s %q", i, res.Status, res.Stdout.Text)
		}
	}
	// Capacity frees up once jobs finish.
	e.wait(e.submit(e.request([]string{"true"}, "true")))
}

func TestIdempotentSubmit(t *testing.T) {
	e := newEnv(t, opts{})
	req := e.request([]string{"echo", "once"}, "echo")
	req["job_id"] = "job_client-chosen-1"
	if id := e.submit(req); id != "job_client-chosen-1" {
		t.Fatalf("id = %s", id)
	}
	e.wait("job_client-chosen-1")
	resp, out := e.post(req)
	if resp.StatusCode != 200 || !strings.Contains(string(out), `"completed"`) {
		t.Errorf("resubmit = %d %s, want 200 completed", resp.StatusCode, out)
	}
	req["command"] = map[string]any{"argv": []string{"echo", "twice"}}
	resp, out = e.post(req)
	if resp.StatusCode != 409 || errCode(out) != job.CodeJobConflict {
		t.Errorf("conflicting resubmit = %d %s, want 409", resp.StatusCode, out)
	}
}

func TestCancelQueuedNeverStarts(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true})
	marker := filepath.Join(e.ws, "started")
	id := e.submit(e.request([]string{"touch", marker}, "touch"))
	st, err := e.c.Cancel(context.Background(), id)
	if err != nil || st.Status != job.StatusCanceled {
		t.Fatalf("cancel = %+v %v", st, err)
	}
	e.start()
	e.wait(e.submit(e.request([]string{"true"}, "true"))) // the queue has moved past it
	res := e.wait(id)
	if res.Status != job.StatusCanceled || res.Error.Code != job.CodeRunCanceled {
		t.Errorf("canceled job = %s %+v", res.Status, res.Error)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a job canceled while queued ran anyway")
	}
}

func TestCancelRunning(t *testing.T) {
	e := newEnv(t, opts{})
	id := e.submit(e.request([]string{"sleep", "30"}, "sleep"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, _ := e.c.Get(context.Background(), id)
		if st.Status == job.StatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("job never started")
		}
	}
	start := time.Now()
	st, err := e.c.Cancel(context.Background(), id)
	if err != nil || st.Status != job.StatusCanceled || st.Result == nil || st.Result.Error == nil || st.Result.Error.Code != job.CodeRunCanceled {
		t.Fatalf("cancel running = %+v %v, want canceled with %s", st, err, job.CodeRunCanceled)
	}
	// A job canceled before its process started has no termination record;
	// one canceled while its process ran was killed for that reason.
	if term := st.Result.Termination; term != nil && term.Reason != job.ReasonCanceled {
		t.Errorf("termination reason = %q, want %q", term.Reason, job.ReasonCanceled)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("cancel took %s", time.Since(start))
	}
}

func TestEventsSSEAndResume(t *testing.T) {
	e := newEnv(t, opts{})
	id := e.submit(e.request([]string{"python3", "-c", "import time\nfor i in range(3):\n print('line', i, flush=True); time.sleep(0.1)"}, "python3"))
	var events []client.Event
	if err := e.c.Follow(context.Background(), id, func(ev client.Event) error { events = append(events, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	var types, out []string
	for _, ev := range events {
		types = append(types, ev.Type+":"+string(ev.Status))
		if ev.Type == "stdout" {
			out = append(out, ev.Text)
		}
	}
	if got := strings.Join(out, ""); got != "line 0\nline 1\nline 2\n" {
		t.Errorf("live stdout = %q", got)
	}
	if len(types) < 3 || types[0] != "status:queued" || types[1] != "status:running" || types[len(types)-1] != "status:completed" {
		t.Errorf("event order = %v", types)
	}
	// Resume after the second event: only later events arrive.
	req, _ := http.NewRequest(http.MethodGet, e.url+"/v1/jobs/"+id+"/events", nil)
	req.Header.Set("Last-Event-ID", fmt.Sprint(events[1].ID))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), fmt.Sprintf("id: %d\n", events[1].ID)) || !strings.Contains(string(body), fmt.Sprintf("id: %d\n", events[2].ID)) {
		t.Errorf("resumed stream:\n%s", body)
	}
}

func TestList(t *testing.T) {
	e := newEnv(t, opts{})
	for i := 0; i < 5; i++ {
		req := e.request([]string{"true"}, "true")
		req["trace"] = map[string]any{"agent_id": fmt.Sprint("agent-", i%2)}
		e.wait(e.submit(req))
	}
	e.wait(e.submit(e.request([]string{"false"}, "false")))
	var page httpapi.JobList
	code, body, _ := get(t, e.url+"/v1/jobs?status=completed&limit=2")
	json.Unmarshal(body, &page)
	if code != 200 || len(page.Jobs) != 2 || page.NextCursor == "" {
		t.Fatalf("page 1 = %d %s", code, body)
	}
	seen := len(page.Jobs)
	for page.NextCursor != "" {
		_, body, _ = get(t, e.url+"/v1/jobs?status=completed&limit=2&cursor="+page.NextCursor)
		page = httpapi.JobList{}
		json.Unmarshal(body, &page)
		seen += len(page.Jobs)
	}
	if seen != 5 {
		t.Errorf("paged through %d completed jobs, want 5", seen)
	}
	_, body, _ = get(t, e.url+"/v1/jobs?trace.agent_id=agent-1")
	json.Unmarshal(body, &page)
	if len(page.Jobs) != 2 {
		t.Errorf("trace filter matched %d, want 2", len(page.Jobs))
	}
	if code, _, _ := get(t, e.url+"/v1/jobs?status=bogus"); code != 422 {
		t.Errorf("bad status filter = %d", code)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, opts{})
	e.wait(e.submit(e.request([]string{"true"}, "true")))
	// The worker counts a job just after its result is visible: wait for it.
	var body []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, body, _ = get(t, e.url+"/metrics"); strings.Contains(string(body), "agent_runner_jobs_total{") {
			break
		}
	}
	for _, want := range []string{`agent_runner_jobs_total{backend="local_process",status="completed"} 1`, "agent_runner_queue_depth", "agent_runner_job_duration_seconds_bucket"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestTraceparentJoinsTraceID(t *testing.T) {
	e := newEnv(t, opts{})
	resp, out := e.post(e.request([]string{"true"}, "true"), "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	var acc httpapi.Accepted
	json.Unmarshal(out, &acc)
	if resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode, string(out))
	}
	res := e.wait(acc.JobID)
	if got := res.Trace.String(job.TraceID); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace.trace_id = %q, want the traceparent trace id", got)
	}
}
