package sessionapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/store"
)

// ownerServer serves the sessions routes over a local_process service
// configured by edit, each request's owner (session.WithOwner) taken
// from its X-Owner header as serve takes it from the token.
func ownerServer(t *testing.T, edit func(*session.Config)) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	set := backend.Set{"local_process": localprocess.Backend{}}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: "local_process", Backends: set})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := store.OpenRecords(filepath.Join(dir, "store", store.Sessions.Dir), store.Sessions)
	if err != nil {
		t.Fatal(err)
	}
	cfg := session.Config{Runner: r, Records: recs, Backends: set, DefaultBackend: "local_process", UnsafeLocalProcess: true}
	edit(&cfg)
	s, err := session.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	mux := http.NewServeMux()
	sessionapi.Routes(mux, s, func(_ string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(session.WithOwner(r.Context(), r.Header.Get("X-Owner"))))
		})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// post sends body as owner and returns the status and the decoded JSON.
func post(t *testing.T, srv *httptest.Server, owner, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
	req.Header.Set("X-Owner", owner)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return resp.StatusCode, v
}

// TestCreateFields: the create's idle, timeout, env and secrets fields and the
// record's answer; what is not offered is refused with its field named.
func TestCreateFields(t *testing.T) {
	srv := ownerServer(t, func(*session.Config) {})
	status, rec := post(t, srv, "", "/v1/sandboxes", `{"idle_timeout_s": 30, "auto_pause": true, "on_timeout": "pause", "auto_resume": true, "env": {"A": "1"}}`)
	if status != 201 {
		t.Fatalf("create = %d %v", status, rec)
	}
	got := map[string]any{"idle_timeout_s": rec["idle_timeout_s"], "auto_pause": rec["auto_pause"], "on_timeout": rec["on_timeout"], "auto_resume": rec["auto_resume"], "env": rec["env"], "usage": rec["usage"]}
	want := map[string]any{"idle_timeout_s": 30.0, "auto_pause": true, "on_timeout": "pause", "auto_resume": true, "env": map[string]any{"A": "1"}, "usage": nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	status, rec = post(t, srv, "", "/v1/sandboxes/"+rec["id"].(string)+"/pause", "")
	if status != 200 || rec["paused_by"] != "caller" {
		t.Errorf("pause = %d paused_by %v, want 200 caller", status, rec["paused_by"])
	}
	for _, c := range []struct {
		body   string
		status int
		code   job.Code
		field  string
	}{
		{`{"auto_pause": true}`, 422, job.CodeInvalidRequest, "auto_pause"},
		{`{"idle_timeout_s": -1}`, 422, job.CodeInvalidRequest, "idle_timeout_s"},
		{`{"on_timeout": "kill"}`, 422, job.CodeInvalidRequest, "on_timeout"},
		{`{"auto_resume": true}`, 422, job.CodeInvalidRequest, "auto_resume"},
		{`{"workspace": {"repository": "https://example.com/r.git"}}`, 403, job.CodeNetworkDenied, "workspace.repository"},
		{`{"workspace": {"repository": "ssh://example.com/r.git"}}`, 403, job.CodeNetworkDenied, "workspace.repository"},
		{`{"secrets": ["API_KEY"]}`, 403, job.CodeForbidden, "secrets"},
		{`{"env": {"A=B": "x"}}`, 422, job.CodeInvalidRequest, "env"},
	} {
		status, v := post(t, srv, "", "/v1/sandboxes", c.body)
		e, _ := v["error"].(map[string]any)
		details, _ := e["details"].(map[string]any)
		if status != c.status || e["code"] != string(c.code) || details["field"] != c.field {
			t.Errorf("create %s = %d %v; want %d %s field %s", c.body, status, e, c.status, c.code, c.field)
		}
	}
}

// TestCreatePerOwnerCap: one owner's create past its cap is 429
// session.limit_reached naming the cap, its limit and what is in use;
// another owner's is not held by it.
func TestCreatePerOwnerCap(t *testing.T) {
	srv := ownerServer(t, func(cfg *session.Config) { cfg.MaxPerOwner = 1 })
	if status, v := post(t, srv, "alice", "/v1/sandboxes", `{}`); status != 201 {
		t.Fatalf("alice's first create = %d %v", status, v)
	}
	status, v := post(t, srv, "alice", "/v1/sandboxes", `{}`)
	want := map[string]any{"error": map[string]any{
		"code": "session.limit_reached", "message": "this token keeps at most 1 sandboxes; delete one first",
		"details": map[string]any{"cap": "sandboxes_per_token", "limit": 1.0, "in_use": 1.0, "requested": 1.0},
	}}
	if diff := cmp.Diff(want, v); status != 429 || diff != "" {
		t.Errorf("alice's second create = %d (-want +got):\n%s", status, diff)
	}
	if status, v := post(t, srv, "bob", "/v1/sandboxes", `{}`); status != 201 {
		t.Errorf("bob's create = %d %v", status, v)
	}
}
