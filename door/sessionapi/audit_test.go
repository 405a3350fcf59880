package sessionapi_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/agent/audit"
	"github.com/agent-runner/agent-runner/job"
)

// TestAuditRoute: GET /v1/sandboxes/{id}/audit answers the sandbox's
// audit log as NDJSON, live (chain intact, not complete) and once it
// ended (complete); an unknown sandbox is 404.
func TestAuditRoute(t *testing.T) {
	srv, scopes := newServer(t)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/sandboxes", `{"id":"a1"}`},
		{"PUT", "/v1/sandboxes/a1/files?path=x.txt", "1234"},
		{"POST", "/v1/sandboxes/a1/exec", `{"argv":["cat","x.txt"]}`},
	} {
		if got := call(t, srv, c.method, c.path, c.body); got.Status >= 300 {
			t.Fatalf("%s %s = %+v", c.method, c.path, got)
		}
	}
	get := func(complete bool, lines int) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/v1/sandboxes/a1/audit")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("GET audit = %d %s %s, want 200 application/x-ndjson", resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		rep, err := audit.Verify(bytes.NewReader(b))
		if err != nil || !rep.OK || rep.Complete != complete || rep.Lines != lines {
			t.Errorf("Verify(GET audit) = %+v, %v; want ok, %d lines, complete %v", rep, err, lines, complete)
		}
		if !strings.Contains(string(b), `"tool":"write_file"`) || !strings.Contains(string(b), `"tool":"exec"`) {
			t.Errorf("GET audit = %s, want the write and the exec", b)
		}
	}
	get(false, 3)
	if got := call(t, srv, "DELETE", "/v1/sandboxes/a1", ""); got.Status != 200 {
		t.Fatalf("DELETE = %+v", got)
	}
	get(true, 4)
	if got := call(t, srv, "GET", "/v1/sandboxes/nope/audit", ""); got.Status != 404 || got.Code != job.CodeJobNotFound {
		t.Errorf("GET audit of an unknown sandbox = %+v, want 404 job.not_found", got)
	}
	for _, s := range *scopes {
		if s != "sessions" {
			t.Errorf("a route asked for scope %q, want sessions", s)
		}
	}
}
