package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/agent/runs"
	"github.com/agent-runner/agent-runner/plane"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/workspaceroot"

	_ "github.com/agent-runner/agent-runner/backend/localprocess"
)

// env is a runs.Service on a workspace root with a logs directory, its jobs on
// a plane of local_process workers, behind an httptest server.
type env struct {
	svc  *runs.Service
	url  string
	root string // the workspace root
	runs string // the agent runs directory
	// events is the queue the service publishes runs' progress on.
	events *queue.Queue
}

const logText = "INFO start\nERROR disk full\nINFO retry\nERROR disk still full\n"

func newEnv(t *testing.T) *env {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "ws")
	store := filepath.Join(root, "store") // under the root, as serve's default is
	for _, d := range []string{filepath.Join(root, "logs"), filepath.Join(root, "out"), store} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "logs", "app.log"), []byte(logText), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{StoreDir: store, DefaultBackend: "local_process"})
	if err != nil {
		t.Fatal(err)
	}
	roots, err := workspaceroot.New([]string{root}, store)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plane.Open(context.Background(), plane.Config{Runner: r, Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runsDir := filepath.Join(store, "agent-runs")
	svc, err := runs.New(ctx, runs.Config{Dir: runsDir, Runner: r, Backend: "local_process", Roots: roots, Events: p.Jobs.Queue()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	Routes(mux, svc, func(_ string, h http.Handler) http.Handler { return h })
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		cancel()
		svc.Wait()
		p.Close()
		r.Close()
	})
	return &env{svc: svc, url: srv.URL, root: root, runs: runsDir, events: p.Jobs.Queue()}
}

// call sends a request and decodes the JSON answer into out.
func (e *env) call(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// launch posts req and returns the accepted run id.
func (e *env) launch(t *testing.T, req runs.LaunchRequest) string {
	t.Helper()
	var info runs.Info
	if code := e.call(t, "POST", "/v1/agent-runs", req, &info); code != http.StatusAccepted {
		t.Fatalf("POST /v1/agent-runs = %d, want 202", code)
	}
	if info.Status != runs.StatusRunning || info.RunID == "" {
		t.Fatalf("accepted %+v, want a running run with an id", info)
	}
	return info.RunID
}

// wait polls the run until it is finished.
func (e *env) wait(t *testing.T, id string) runs.Run {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var run runs.Run
		if code := e.call(t, "GET", "/v1/agent-runs/"+id, nil, &run); code != http.StatusOK {
			t.Fatalf("GET run = %d", code)
		}
		if run.Status != runs.StatusRunning {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still running", id)
		}
	}
}

const scriptedManifest = `name: log-reader
capabilities:
  tools: [list_logs, read_log, run_tests]
  filesystem:
    read: [logs]
    write: []
  commands:
    allow: [/bin/echo]
limits:
  max_tool_calls: 10
`

const scriptedTask = `steps:
  - tool: list_logs
    args: {directory: logs}
  - tool: read_log
    args: {path: logs/app.log}
  - tool: read_log
    args: {path: /etc/passwd}
  - tool: run_tests
    args: {command: /bin/echo, working_directory: logs, args: [from-the-job]}
`

// TestScriptedRun: a scripted task on local_process through the jobs
// service; its summary, compiled policy and audit trail (a denial among
// the events, the chain verified) are served.
func TestScriptedRun(t *testing.T) {
	e := newEnv(t)
	id := e.launch(t, runs.LaunchRequest{ManifestYAML: scriptedManifest, Mode: runs.ModeTask, TaskYAML: scriptedTask})
	run := e.wait(t, id)
	if run.Status != runs.StatusFinished || run.Summary == nil {
		t.Fatalf("run = %+v, want finished with a summary", run.Info)
	}
	if got, want := run.ExitReason, launch.ExitCompleted; got != want {
		t.Errorf("exit_reason = %q, want %q", got, want)
	}
	if got, want := [3]int{run.Allowed, run.Denied, run.Failed}, [3]int{3, 1, 0}; got != want {
		t.Errorf("allowed, denied, failed = %v, want %v (steps %+v)", got, want, run.Summary.Steps)
	}
	if got, want := run.Mode, runs.ModeTask; got != want {
		t.Errorf("mode = %q, want %q", got, want)
	}
	if got, want := run.Summary.Steps[3].JobStatus, "completed"; got != want {
		t.Errorf("run_tests job_status = %q, want %q (through the jobs service)", got, want)
	}
	var pol struct {
		Name      string   `json:"name"`
		ReadRoots []string `json:"read_roots"`
	}
	if err := json.Unmarshal(run.Policy, &pol); err != nil {
		t.Fatalf("policy %s: %v", run.Policy, err)
	}
	if got, want := strings.Join(pol.ReadRoots, ","), filepath.Join(e.root, "logs"); pol.Name != "log-reader" || got != want {
		t.Errorf("policy name %q, read_roots %q; want log-reader, %q (relative to the workspace root)", pol.Name, got, want)
	}
	for _, f := range []string{"manifest.yaml", "task.yaml", "audit.jsonl", "summary.json"} {
		if _, err := os.Stat(filepath.Join(e.runs, id, f)); err != nil {
			t.Errorf("run directory lacks %s: %v", f, err)
		}
	}

	var trail runs.Trail
	if code := e.call(t, "GET", "/v1/agent-runs/"+id+"/audit", nil, &trail); code != http.StatusOK {
		t.Fatalf("GET audit = %d", code)
	}
	if !trail.Verify.OK || !trail.Verify.Complete {
		t.Errorf("verify = %+v, want ok and complete", trail.Verify)
	}
	var denied []string
	var stdout string
	for _, raw := range trail.Events {
		var ev struct {
			Event   string          `json:"event"`
			Tool    string          `json:"tool"`
			Allowed *bool           `json:"allowed"`
			Args    json.RawMessage `json:"args"`
			Result  struct {
				Stdout string `json:"stdout"`
			} `json:"result"`
		}
		json.Unmarshal(raw, &ev)
		if ev.Event == "tool_call" && ev.Allowed != nil && !*ev.Allowed {
			var args bytes.Buffer
			json.Compact(&args, ev.Args)
			denied = append(denied, ev.Tool+" "+args.String())
		}
		if ev.Event == "tool_result" && ev.Tool == "run_tests" {
			stdout = ev.Result.Stdout
		}
	}
	if got, want := strings.Join(denied, ";"), `read_log {"path":"/etc/passwd"}`; got != want {
		t.Errorf("denied calls = %q, want %q", got, want)
	}
	if got, want := stdout, "from-the-job\n"; got != want {
		t.Errorf("run_tests stdout = %q, want %q", got, want)
	}
	if got, want := len(trail.Events), trail.Verify.Lines; got != want {
		t.Errorf("%d events, want the %d lines verified", got, want)
	}

	var list struct{ Runs []runs.Info }
	e.call(t, "GET", "/v1/agent-runs", nil, &list)
	if len(list.Runs) != 1 || list.Runs[0].RunID != id || list.Runs[0].Denied != 1 {
		t.Errorf("list = %+v, want the one run with 1 denial", list.Runs)
	}
}

// TestEditedAuditFailsVerification: the audit route reports a chain
// broken by an edit of the log.
func TestEditedAuditFailsVerification(t *testing.T) {
	e := newEnv(t)
	id := e.launch(t, runs.LaunchRequest{ManifestYAML: scriptedManifest, Mode: runs.ModeTask, TaskYAML: scriptedTask})
	e.wait(t, id)
	path := filepath.Join(e.runs, id, "audit.jsonl")
	b, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(b, []byte(`/etc/passwd`), []byte(`/etc/hostname`), 1), 0o644)
	var trail runs.Trail
	e.call(t, "GET", "/v1/agent-runs/"+id+"/audit", nil, &trail)
	if trail.Verify.OK || trail.Verify.BrokenLine == 0 {
		t.Errorf("verify = %+v, want a broken chain", trail.Verify)
	}
}

// TestMockAgentRun: mode mock runs the agent loop with the mock model on
// the manifest's first read root.
func TestMockAgentRun(t *testing.T) {
	e := newEnv(t)
	manifest := `name: log-analyst
capabilities:
  tools: [list_logs, tail_log, grep_log]
  filesystem:
    read: [logs]
`
	id := e.launch(t, runs.LaunchRequest{ManifestYAML: manifest, Mode: runs.ModeMock})
	run := e.wait(t, id)
	if run.Summary == nil {
		t.Fatalf("run = %+v, want a summary", run.Info)
	}
	if got, want := run.ExitReason, launch.ExitFinalAnswer; got != want {
		t.Errorf("exit_reason = %q, want %q", got, want)
	}
	if got, want := run.Mode, runs.ModeMock; got != want {
		t.Errorf("mode = %q, want %q", got, want)
	}
	if got, want := run.ToolCallsUsed, int64(3); got != want {
		t.Errorf("tool_calls_used = %d, want %d (list, tail, grep)", got, want)
	}
	if !strings.Contains(run.Summary.FinalAnswer, "ERROR disk full") {
		t.Errorf("final answer %q lacks the log's ERROR line", run.Summary.FinalAnswer)
	}
	if _, err := os.Stat(filepath.Join(e.runs, id, "conversation.json")); err != nil {
		t.Errorf("no conversation.json: %v", err)
	}
	var trail runs.Trail
	e.call(t, "GET", "/v1/agent-runs/"+id+"/audit", nil, &trail)
	if !trail.Verify.OK || !trail.Verify.Complete {
		t.Errorf("verify = %+v, want ok and complete", trail.Verify)
	}
}

// TestManifestsOutsideTheRootsAreRefused: every host path a manifest
// names is held to the workspace roots, and nothing is created for a
// refused one.
func TestManifestsOutsideTheRootsAreRefused(t *testing.T) {
	e := newEnv(t)
	outside := filepath.Dir(e.root)
	if err := os.Symlink("/etc", filepath.Join(e.root, "etc-link")); err != nil {
		t.Fatal(err)
	}
	// A link that stays inside the root: a job of a run writing there
	// could repoint it, so the directory itself must be named.
	if err := os.Symlink(filepath.Join(e.root, "logs"), filepath.Join(e.root, "logs-link")); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(e.root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(e.root, "secret.sh")
	os.WriteFile(secret, []byte("#!/bin/sh\necho s3cret\n"), 0o700)
	fs := func(read, write, commands string) string {
		return "name: probe\ncapabilities:\n  tools: [read_log, run_tests]\n  filesystem:\n    read: " + read + "\n    write: " + write + "\n  commands:\n    allow: " + commands + "\n"
	}
	tests := []struct {
		name, manifest, wantCode string
	}{
		{"absolute read root outside", fs("[/etc]", "[]", "[]"), "validation.path_escape"},
		{"relative read root climbing out", fs("[../]", "[]", "[]"), "validation.path_escape"},
		{"write root outside", fs("[logs]", "["+outside+"]", "[]"), "validation.path_escape"},
		{"read root through a symlink", fs("[etc-link]", "[]", "[]"), "validation.path_escape"},
		{"read root through a symlink inside the root", fs("[logs-link]", "[]", "[]"), "validation.path_escape"},
		{"the run store", fs("[store/agent-runs]", "[]", "[]"), "validation.path_escape"},
		{"a root holding the store", fs("[.]", "[]", "[]"), "validation.path_escape"},
		{"a missing read root", fs("[nope]", "[]", "[]"), "validation.invalid_request"},
		{"read root beneath its own write root", fs("[out/sub]", "[out]", "[]"), "validation.path_escape"},
		{"command is a FIFO", fs("[logs]", "[]", "["+fifo+"]"), "validation.invalid_request"},
		{"command is a device", fs("[logs]", "[]", "[/dev/zero]"), "validation.invalid_request"},
		{"command only its owner may read", fs("[logs]", "[]", "["+secret+"]"), "validation.invalid_request"},
		{"command missing", fs("[logs]", "[]", "[/no/such/binary]"), "validation.invalid_request"},
		{"unknown tool", "name: x\ncapabilities:\n  tools: [rm_rf]\n", "validation.invalid_request"},
	}
	if err := os.MkdirAll(filepath.Join(e.root, "out", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body struct {
				Error struct{ Code, Message string }
			}
			code := e.call(t, "POST", "/v1/agent-runs", runs.LaunchRequest{ManifestYAML: tt.manifest, Mode: runs.ModeTask, TaskYAML: "steps: [{tool: read_log}]"}, &body)
			if code != http.StatusUnprocessableEntity || body.Error.Code != tt.wantCode {
				t.Errorf("POST = %d %s (%s), want 422 %s", code, body.Error.Code, body.Error.Message, tt.wantCode)
			}
		})
	}
	entries, _ := os.ReadDir(e.runs)
	if len(entries) != 0 {
		t.Errorf("refused launches left %d entries in %s", len(entries), e.runs)
	}
}

// TestRequestsAndIDsAreChecked: a bad mode or task, an unknown or
// malformed id, and a bad limit are refused with the job codes.
func TestRequestsAndIDsAreChecked(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		method, path string
		body         any
		wantStatus   int
	}{
		{"POST", "/v1/agent-runs", runs.LaunchRequest{ManifestYAML: scriptedManifest, Mode: "shell"}, 422},
		{"POST", "/v1/agent-runs", runs.LaunchRequest{ManifestYAML: scriptedManifest, Mode: runs.ModeTask}, 422},
		{"POST", "/v1/agent-runs", runs.LaunchRequest{ManifestYAML: scriptedManifest, Mode: runs.ModeMock, TaskYAML: scriptedTask}, 422},
		{"POST", "/v1/agent-runs", map[string]any{"manifest_yaml": scriptedManifest, "mode": "mock", "extra": 1}, 422},
		{"POST", "/v1/agent-runs", runs.LaunchRequest{ManifestYAML: strings.Repeat("#", MaxBodyBytes), Mode: runs.ModeMock}, 413},
		{"GET", "/v1/agent-runs/6f1d0c53-7a38-4a4e-9d51-0c3c1f4f9a10", nil, 404},
		{"GET", "/v1/agent-runs/..%2F..%2Fetc", nil, 404},
		{"GET", "/v1/agent-runs/6F1D0C53-7A38-4A4E-9D51-0C3C1F4F9A10/audit", nil, 404},
		{"GET", "/v1/agent-runs?limit=0", nil, 422},
		{"GET", "/v1/agent-runs?limit=1000", nil, 200},
	}
	for _, tt := range tests {
		var body map[string]any
		if got := e.call(t, tt.method, tt.path, tt.body, &body); got != tt.wantStatus {
			t.Errorf("%s %s = %d %v, want %d", tt.method, tt.path, got, body, tt.wantStatus)
		}
	}
}

// TestInterruptedRun: a run directory with no summary and no run in
// progress (the server stopped mid-run) is listed interrupted, its chain
// verified as far as it goes.
func TestInterruptedRun(t *testing.T) {
	e := newEnv(t)
	id := e.launch(t, runs.LaunchRequest{ManifestYAML: scriptedManifest, Mode: runs.ModeTask, TaskYAML: scriptedTask})
	e.wait(t, id)
	os.Remove(filepath.Join(e.runs, id, "summary.json"))
	var run runs.Run
	e.call(t, "GET", "/v1/agent-runs/"+id, nil, &run)
	if got, want := run.Status, runs.StatusInterrupted; got != want {
		t.Errorf("status = %q, want %q", got, want)
	}
	var trail runs.Trail
	e.call(t, "GET", "/v1/agent-runs/"+id+"/audit", nil, &trail)
	if !trail.Verify.OK {
		t.Errorf("verify = %+v, want ok", trail.Verify)
	}
}
