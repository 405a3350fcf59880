package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMissesAnswerJSON: unknown routes answered the mux's plain text.
func TestMissesAnswerJSON(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("list")) })
	h := jsonMisses(mux)
	tests := []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/v1/jobs", 200, "list"},
		{"GET", "/v1/nothing", 404, `"code": "job.not_found"`},
		{"DELETE", "/v1/jobs", 405, `"code": "validation.invalid_request"`},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.body) {
			t.Errorf("%s %s = %d %q, want %d with %q", tt.method, tt.path, rec.Code, rec.Body.String(), tt.status, tt.body)
		}
	}
}
