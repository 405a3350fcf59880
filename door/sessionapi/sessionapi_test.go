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

// newServer serves the sessions routes over a local_process service
// whose files are capped at 8 bytes; every route is wrapped so the test
// sees the scope it asks for.
func newServer(t *testing.T) (*httptest.Server, *[]string) {
	t.Helper()
	return newServerWith(t, nil)
}

// newServerWith is newServer with edit applied to the service's config
// (nil: none).
func newServerWith(t *testing.T, edit func(*session.Config)) (*httptest.Server, *[]string) {
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
	cfg := session.Config{Runner: r, Records: recs, Backends: set, DefaultBackend: "local_process", UnsafeLocalProcess: true, MaxFileBytes: 8}
	if edit != nil {
		edit(&cfg)
	}
	s, err := session.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var scopes []string
	mux := http.NewServeMux()
	sessionapi.Routes(mux, s, func(scope string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			scopes = append(scopes, scope)
			h.ServeHTTP(w, r)
		})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &scopes
}

type answer struct {
	Status int
	Code   job.Code
	Body   string
}

func call(t *testing.T, srv *httptest.Server, method, path, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct{ Error job.Error }
	json.Unmarshal(b, &e)
	a := answer{Status: resp.StatusCode, Code: e.Error.Code}
	if e.Error.Code == "" && resp.Header.Get("Content-Type") == "application/octet-stream" {
		a.Body = string(b)
	}
	return a
}

// TestRoutes: what the door reads and answers, route by route, every
// one under the sessions scope.
func TestRoutes(t *testing.T) {
	srv, scopes := newServer(t)
	tests := []struct {
		name, method, path, body string
		want                     answer
	}{
		{"create", "POST", "/v1/sandboxes", `{"id":"s1","metadata":{"team":"a"}}`, answer{Status: 201}},
		{"create again", "POST", "/v1/sandboxes", `{"id":"s1","metadata":{"team":"a"}}`, answer{Status: 200}},
		{"unknown field", "POST", "/v1/sandboxes", `{"id":"s2","image":"x"}`, answer{Status: 422, Code: job.CodeInvalidRequest}},
		{"not JSON", "POST", "/v1/sandboxes", `{`, answer{Status: 422, Code: job.CodeInvalidRequest}},
		{"list bad state", "GET", "/v1/sandboxes?state=asleep", "", answer{Status: 422, Code: job.CodeInvalidRequest}},
		{"list", "GET", "/v1/sandboxes?state=running&metadata.team=a", "", answer{Status: 200}},
		{"put", "PUT", "/v1/sandboxes/s1/files?path=d/a.txt&mode=0600", "8 bytes!", answer{Status: 200}},
		{"get", "GET", "/v1/sandboxes/s1/files?path=d/a.txt", "", answer{Status: 200, Body: "8 bytes!"}},
		{"put over the cap", "PUT", "/v1/sandboxes/s1/files?path=b.txt", "nine byte", answer{Status: 413, Code: job.CodeBodyTooLarge}},
		{"bad mode", "PUT", "/v1/sandboxes/s1/files?path=b.txt&mode=rwx", "x", answer{Status: 422, Code: job.CodeInvalidRequest}},
		{"no path: the root listed", "GET", "/v1/sandboxes/s1/files", "", answer{Status: 200}},
		{"escape", "GET", "/v1/sandboxes/s1/files?path=../x", "", answer{Status: 422, Code: job.CodePathEscape}},
		{"exec", "POST", "/v1/sandboxes/s1/exec", `{"argv":["cat","d/a.txt"]}`, answer{Status: 200}},
		{"exec without argv", "POST", "/v1/sandboxes/s1/exec", `{}`, answer{Status: 422, Code: job.CodeInvalidRequest}},
		{"timeout zero", "POST", "/v1/sandboxes/s1/timeout", `{"timeout_s":0}`, answer{Status: 422, Code: job.CodeInvalidRequest}},
		{"timeout", "POST", "/v1/sandboxes/s1/timeout", `{"timeout_s":30}`, answer{Status: 200}},
		{"pause", "POST", "/v1/sandboxes/s1/pause", "", answer{Status: 200}},
		{"exec paused", "POST", "/v1/sandboxes/s1/exec", `{"argv":["true"]}`, answer{Status: 409, Code: job.CodeSessionNotRunning}},
		{"resume", "POST", "/v1/sandboxes/s1/resume", "", answer{Status: 200}},
		{"delete", "DELETE", "/v1/sandboxes/s1", "", answer{Status: 200}},
		{"pause deleted", "POST", "/v1/sandboxes/s1/pause", "", answer{Status: 409, Code: job.CodeSessionNotRunning}},
		{"unknown", "GET", "/v1/sandboxes/s9", "", answer{Status: 404, Code: job.CodeJobNotFound}},
	}
	for _, tt := range tests {
		if got := call(t, srv, tt.method, tt.path, tt.body); !cmp.Equal(got, tt.want) {
			t.Errorf("%s: %s %s: (-want +got)\n%s", tt.name, tt.method, tt.path, cmp.Diff(tt.want, got))
		}
	}
	for _, s := range *scopes {
		if s != "sessions" {
			t.Errorf("a route asked for scope %q, want sessions", s)
		}
	}
	if len(*scopes) != len(tests) {
		t.Errorf("%d calls went through the wrapper, want %d", len(*scopes), len(tests))
	}
}
