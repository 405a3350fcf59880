package httpapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/job"
)

// TestGuardSelfAuthenticatedPrefix: under a prefix declared with
// AuthenticatesItself the door checks tokens and bodies itself (no
// bearer token, any content type reaches it), while Host and Origin are
// still the guard's; next to the prefix nothing changes.
func TestGuardSelfAuthenticatedPrefix(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(auth.Hash("secret")+" admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, opts{noWorkers: true, tokens: tokens})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	e.api.Mux().Handle("/e2b/", ok)
	e.api.Mux().Handle("/e2bx/", ok)
	e.api.AuthenticatesItself("/e2b")
	tests := []struct {
		path, ctype, origin string
		want                answer
	}{
		{"/e2b/files", "multipart/form-data; boundary=x", "", answer{Status: 204}},
		{"/e2b/process.Process/Start", "application/proto", "", answer{Status: 204}},
		{"/e2b/files", "multipart/form-data; boundary=x", "http://evil.example", answer{Status: 403, Code: job.CodeForbidden, Close: true}},
		{"/e2bx/files", "application/json", "", answer{Status: 401, Code: job.CodeUnauthorized, Close: true}},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest("POST", e.url+tt.path, strings.NewReader("bytes"))
		req.Header.Set("Content-Type", tt.ctype)
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		if got := do(t, req); !cmp.Equal(got, tt.want) {
			t.Errorf("POST %s (%s, origin %q): got, want %s", tt.path, tt.ctype, tt.origin, cmp.Diff(tt.want, got))
		}
	}
}
