package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/door/httpapi"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// TestMountedRoutesAreGuarded checks that routes other doors add on Mux
// are behind the token check even when they forget Auth, and that Auth
// enforces its scope.
func TestMountedRoutesAreGuarded(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte(auth.Hash("reader")+" read\n"+auth.Hash("root")+" admin\n"), 0o600)
	tokens, err := auth.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, opts{tokens: tokens, noWorkers: true})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	e.api.Mux().Handle("GET /api/v1/unguarded", ok)
	e.api.Mux().Handle("POST /api/v1/guarded", e.api.Auth(httpapi.ScopeSubmit, ok))
	tests := []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/api/v1/unguarded", "", 401},
		{"GET", "/api/v1/unguarded", "bogus", 401},
		{"GET", "/api/v1/unguarded", "reader", 418},
		{"POST", "/api/v1/guarded", "", 401},
		{"POST", "/api/v1/guarded", "reader", 403},
		{"POST", "/api/v1/guarded", "root", 418},
		{"GET", "/no/such/route", "", 401},
		{"GET", "/no/such/route", "reader", 404},
		{"GET", "/health", "", 200},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, e.url+tt.path, nil)
		if tt.token != "" {
			req.Header.Set("Authorization", "Bearer "+tt.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s %s with %q = %d, want %d", tt.method, tt.path, tt.token, resp.StatusCode, tt.want)
		}
	}
}

// TestInProcessSubmitAndWait is the path MCP and the task API use.
func TestInProcessSubmitAndWait(t *testing.T) {
	e := newEnv(t, opts{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := job.Request{
		JobID:     "job_inprocess-1",
		Workspace: job.Workspace{Path: e.ws},
		Command:   job.Command{Argv: []string{"echo", "in process"}},
		Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: "echo"}}},
	}
	again := req
	acc, created, err := e.api.Jobs().Submit(ctx, &req)
	if err != nil || !created {
		t.Fatalf("Submit = %+v, %v, %v; want created", acc, created, err)
	}
	if diff := cmp.Diff(httpapi.Accepted{JobID: "job_inprocess-1", Status: job.StatusQueued}, acc); diff != "" {
		t.Errorf("Submit (-want +got):\n%s", diff)
	}
	res, err := e.api.Jobs().Wait(ctx, acc.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != job.StatusCompleted || res.Stdout.Text != "in process\n" {
		t.Errorf("Wait = %s %q, want completed \"in process\\n\"", res.Status, res.Stdout.Text)
	}
	if _, created, err := e.api.Jobs().Submit(ctx, &again); err != nil || created {
		t.Errorf("resubmit of the same request = created %v, %v; want existing job", created, err)
	}
	other := again
	other.Command.Argv = []string{"echo", "different"}
	if _, _, err := e.api.Jobs().Submit(ctx, &other); job.CodeOf(err) != job.CodeJobConflict {
		t.Errorf("resubmit of a different request = %v, want %s", err, job.CodeJobConflict)
	}
	if _, err := e.api.Jobs().Wait(ctx, "job_missing"); job.CodeOf(err) != job.CodeJobNotFound {
		t.Errorf("Wait(unknown) = %v, want %s", err, job.CodeJobNotFound)
	}
}

// TestLongPollEndsBeforeTheRequestTimeout: ?wait longer than the request
// timeout answers with the current status, not a timeout error.
func TestLongPollEndsBeforeTheRequestTimeout(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true, timeout: 1500 * time.Millisecond})
	id := e.submit(e.request([]string{"true"}, "true"))
	code, body, _ := get(t, e.url+"/v1/jobs/"+id+"?wait=20s")
	var st httpapi.JobStatus
	json.Unmarshal(body, &st)
	if code != http.StatusOK || st.Status != job.StatusQueued {
		t.Errorf("GET ?wait=20s with a 1.5s request timeout = %d %s, want 200 queued", code, body)
	}
}

// TestSSEKeepAlive: an idle event stream gets comment lines.
func TestSSEKeepAlive(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true, keepAlive: 50 * time.Millisecond})
	id := e.submit(e.request([]string{"true"}, "true"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/v1/jobs/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == ": keep-alive" {
			break
		}
	}
	if len(lines) == 0 || lines[len(lines)-1] != ": keep-alive" {
		t.Errorf("stream lines %q, want a keep-alive comment", lines)
	}
	// The queued event came first.
	if !slices.Contains(lines, "event: status") {
		t.Errorf("stream lines %q lack the queued status event", lines)
	}
}

// TestDropUnqueued: a record left "queued" by a submit that never reached
// the queue is removed; queued, running and finished jobs are kept.
func TestDropUnqueued(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true})
	queued := e.submit(e.request([]string{"true"}, "true"))
	st := e.r.Store()
	orphan := "job_orphan-1"
	st.Create(orphan)
	st.WriteStatus(store.StatusRecord{JobID: orphan, Status: job.StatusQueued})
	running := "job_running-1"
	st.Create(running)
	st.WriteStatus(store.StatusRecord{JobID: running, Status: job.StatusRunning})
	got, err := e.api.Jobs().DropUnqueued(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{orphan}, got); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	for id, want := range map[string]bool{queued: true, orphan: false, running: true} {
		if st.Exists(id) != want {
			t.Errorf("record of %s exists = %v, want %v", id, !want, want)
		}
	}
}
