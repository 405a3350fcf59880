package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

// TestServeSessionsScopeAndCap: through the binary, /v1/sandboxes needs
// a token with the sessions scope (or admin) and passes serve's guard;
// past --max-sandboxes a create is 429 session.limit_reached.
func TestServeSessionsScopeAndCap(t *testing.T) {
	addr := freeAddr(t)
	startGuardedServe(t, addr, map[string]string{"ci": "submit,read,cancel", "sess": "sessions", "root": "admin"}, "--max-sandboxes", "1")
	type answer struct {
		Status int
		Code   job.Code
	}
	tests := []struct {
		name, method, path, token, origin, body string
		want                                    answer
	}{
		{"no token", "GET", "/v1/sandboxes", "", "", "", answer{401, job.CodeUnauthorized}},
		{"jobs token lists", "GET", "/v1/sandboxes", "ci", "", "", answer{403, job.CodeForbidden}},
		{"jobs token creates", "POST", "/v1/sandboxes", "ci", "", `{}`, answer{403, job.CodeForbidden}},
		{"jobs token execs", "POST", "/v1/sandboxes/x/exec", "ci", "", `{"argv":["true"]}`, answer{403, job.CodeForbidden}},
		{"jobs token reads a file", "GET", "/v1/sandboxes/x/files?path=a", "ci", "", "", answer{403, job.CodeForbidden}},
		{"sessions token lists", "GET", "/v1/sandboxes", "sess", "", "", answer{200, ""}},
		{"foreign origin", "POST", "/v1/sandboxes", "sess", "http://evil.example", `{}`, answer{403, job.CodeForbidden}},
		{"sessions token creates", "POST", "/v1/sandboxes", "sess", "", `{"id":"one"}`, answer{201, ""}},
		{"past the cap", "POST", "/v1/sandboxes", "root", "", `{}`, answer{429, job.CodeSessionLimit}},
		{"admin deletes", "DELETE", "/v1/sandboxes/one", "root", "", "", answer{200, ""}},
		{"unknown id", "GET", "/v1/sandboxes/none", "sess", "", "", answer{404, job.CodeJobNotFound}},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, "http://"+addr+tt.path, strings.NewReader(tt.body))
		if tt.token != "" {
			req.Header.Set("Authorization", "Bearer "+tt.token)
		}
		if tt.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error job.Error }
		json.Unmarshal(b, &e)
		if diff := cmp.Diff(tt.want, answer{resp.StatusCode, e.Error.Code}); diff != "" {
			t.Errorf("%s: %s %s (-want +got):\n%s%s", tt.name, tt.method, tt.path, diff, b)
		}
	}
}
