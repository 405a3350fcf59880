package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

// TestGuardLetsRawFileUploads: application/octet-stream passes the
// guard on a sandbox file upload (PUT /v1/sandboxes/{id}/files) only;
// everywhere else, and any other non-JSON type there, is 415.
func TestGuardLetsRawFileUploads(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	e.api.Mux().Handle("PUT /v1/sandboxes/{id}/files", ok)
	e.api.AcceptRawBody("PUT /v1/sandboxes/{id}/files")
	e.api.Mux().Handle("POST /v1/sandboxes/{id}/exec", ok)
	unsupported := answer{Status: 415, Code: job.CodeUnsupportedMediaType}
	tests := []struct {
		method, path, ctype string
		want                answer
	}{
		{"PUT", "/v1/sandboxes/s1/files?path=a.txt", "application/octet-stream", answer{Status: 204}},
		{"PUT", "/v1/sandboxes/s1/files?path=a.txt", "text/plain", unsupported},
		{"POST", "/v1/sandboxes/s1/exec", "application/octet-stream", unsupported},
		{"POST", "/v1/jobs", "application/octet-stream", unsupported},
		{"PUT", "/v1/sandboxes/s1/files/x", "application/octet-stream", unsupported},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, e.url+tt.path, strings.NewReader("bytes"))
		req.Header.Set("Content-Type", tt.ctype)
		if got := do(t, req); !cmp.Equal(got, tt.want) {
			t.Errorf("%s %s (%s): got, want %s", tt.method, tt.path, tt.ctype, cmp.Diff(tt.want, got))
		}
	}
}
