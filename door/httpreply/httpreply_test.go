package httpreply

import (
	"net/http/httptest"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

func TestStatus(t *testing.T) {
	tests := []struct {
		code job.Code
		want int
	}{
		{job.CodeInvalidRequest, 422},
		{job.CodePathEscape, 422},
		{job.CodeBodyTooLarge, 413},
		{job.CodeUnsupportedMediaType, 415},
		{job.CodeJobNotFound, 404},
		{job.CodeJobConflict, 409},
		{job.CodeNotTerminal, 409},
		{job.CodeQueueFull, 503},
		{job.CodeUnauthorized, 401},
		{job.CodeForbidden, 403},
		{job.CodeNetworkDenied, 403},
		{job.CodeRunIOFailed, 500},
	}
	for _, tt := range tests {
		if got := Status(tt.code); got != tt.want {
			t.Errorf("Status(%q) = %d, want %d", tt.code, got, tt.want)
		}
	}
}

func TestErrorHeaders(t *testing.T) {
	for _, tt := range []struct {
		code   job.Code
		header string
		want   string
	}{
		{job.CodeQueueFull, "Retry-After", "1"},
		{job.CodeUnauthorized, "Connection", "close"},
	} {
		rec := httptest.NewRecorder()
		Error(rec, job.Errorf(tt.code, "x"))
		if got := rec.Header().Get(tt.header); got != tt.want {
			t.Errorf("Error(%s) %s = %q, want %q", tt.code, tt.header, got, tt.want)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" || rec.Code != Status(tt.code) {
			t.Errorf("Error(%s) = %d %s, want %d application/json", tt.code, rec.Code, ct, Status(tt.code))
		}
	}
}
