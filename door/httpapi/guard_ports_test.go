package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/job"
)

// TestGuardLetsAnyBodyThroughPorts: a body of any type passes the
// guard on the routes the sessions door declares with AcceptAnyBody
// (the ports proxy) and on no other route; a foreign Origin is still
// refused there.
func TestGuardLetsAnyBodyThroughPorts(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for _, p := range sessionapi.AnyBodyPatterns() {
		e.api.Mux().Handle(p, ok)
		e.api.AcceptAnyBody(p)
	}
	e.api.Mux().Handle("POST /v1/sandboxes/{id}/exec", ok)
	unsupported := answer{Status: 415, Code: job.CodeUnsupportedMediaType}
	tests := []struct {
		method, path, ctype, origin string
		want                        answer
	}{
		{"POST", "/v1/sandboxes/s1/ports/8000/form", "application/x-www-form-urlencoded", "", answer{Status: 204}},
		{"PUT", "/v1/sandboxes/s1/ports/8000/a/b?c=d", "text/plain", "", answer{Status: 204}},
		{"PATCH", "/v1/sandboxes/s1/ports/8000/", "multipart/form-data; boundary=x", "", answer{Status: 204}},
		{"DELETE", "/v1/sandboxes/s1/ports/8000/x", "image/png", "", answer{Status: 204}},
		{"POST", "/v1/sandboxes/s1/exec", "text/plain", "", unsupported},
		{"POST", "/v1/sandboxes/s1/ports/8000/form", "text/plain", "http://evil.example", answer{Status: 403, Code: job.CodeForbidden, Close: true}},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, e.url+tt.path, strings.NewReader("bytes"))
		req.Header.Set("Content-Type", tt.ctype)
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		if got := do(t, req); !cmp.Equal(got, tt.want) {
			t.Errorf("%s %s (%s): got, want %s", tt.method, tt.path, tt.ctype, cmp.Diff(tt.want, got))
		}
	}
}
