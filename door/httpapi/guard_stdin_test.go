package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

// TestGuardLetsRawProcessInput: application/octet-stream passes the
// guard on a sandbox process's input (POST
// /v1/sandboxes/{id}/processes/{pid}/stdin) too, and on no other
// process route.
func TestGuardLetsRawProcessInput(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	e.api.Mux().Handle("POST /v1/sandboxes/{id}/processes/{pid}/stdin", ok)
	e.api.AcceptRawBody("POST /v1/sandboxes/{id}/processes/{pid}/stdin")
	e.api.Mux().Handle("POST /v1/sandboxes/{id}/processes/{pid}/signal", ok)
	e.api.Mux().Handle("POST /v1/sandboxes/{id}/processes", ok)
	unsupported := answer{Status: 415, Code: job.CodeUnsupportedMediaType}
	tests := []struct {
		method, path, ctype string
		want                answer
	}{
		{"POST", "/v1/sandboxes/s1/processes/12/stdin", "application/octet-stream", answer{Status: 204}},
		{"POST", "/v1/sandboxes/s1/processes/12/stdin?eof=true", "application/octet-stream", answer{Status: 204}},
		{"POST", "/v1/sandboxes/s1/processes/12/stdin", "text/plain", unsupported},
		{"POST", "/v1/sandboxes/s1/processes/12/signal", "application/octet-stream", unsupported},
		{"POST", "/v1/sandboxes/s1/processes", "application/octet-stream", unsupported},
		{"POST", "/v1/sandboxes/s1/processes//stdin", "application/octet-stream", unsupported},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, e.url+tt.path, strings.NewReader("bytes"))
		req.Header.Set("Content-Type", tt.ctype)
		if got := do(t, req); !cmp.Equal(got, tt.want) {
			t.Errorf("%s %s (%s): got, want %s", tt.method, tt.path, tt.ctype, cmp.Diff(tt.want, got))
		}
	}
}
