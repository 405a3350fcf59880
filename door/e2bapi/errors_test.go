package e2bapi

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

func TestErrorShapes(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   connect.Code
	}{
		{job.Errorf(job.CodeJobNotFound, "x"), http.StatusNotFound, connect.CodeNotFound},
		{job.Errorf(job.CodeUnauthorized, "x"), http.StatusUnauthorized, connect.CodeUnauthenticated},
		{job.Errorf(job.CodeForbidden, "x"), http.StatusForbidden, connect.CodePermissionDenied},
		{job.Errorf(job.CodeInvalidRequest, "x"), http.StatusBadRequest, connect.CodeInvalidArgument},
		{job.Errorf(job.CodePathEscape, "x"), http.StatusBadRequest, connect.CodeInvalidArgument},
		{job.Errorf(job.CodeNetworkDenied, "x"), http.StatusForbidden, connect.CodePermissionDenied},
		{job.Errorf(job.CodeSessionLimit, "x"), http.StatusTooManyRequests, connect.CodeResourceExhausted},
		{job.Errorf(job.CodeDirectoryNotEmpty, "x"), http.StatusConflict, connect.CodeFailedPrecondition},
		{job.Errorf(job.CodeSessionNotRunning, "x").With("state", string(session.StatePaused)), http.StatusConflict, connect.CodeFailedPrecondition},
		{job.Errorf(job.CodeSessionNotRunning, "x").With("state", string(session.StateExpired)), http.StatusBadGateway, connect.CodeUnavailable},
		{job.Errorf(job.CodeSessionNotRunning, "x").With("state", session.ProcessExited), http.StatusConflict, connect.CodeNotFound},
		{job.Errorf(job.CodeRunIOFailed, "x"), http.StatusInternalServerError, connect.CodeInternal},
		{notSupported("x"), http.StatusNotImplemented, connect.CodeUnimplemented},
	} {
		if got := httpStatus(tc.err); got != tc.status {
			t.Errorf("httpStatus(%v) = %d, want %d", tc.err, got, tc.status)
		}
		if got := connect.CodeOf(rpcError(tc.err)); got != tc.code {
			t.Errorf("rpcError(%v) = %v, want %v", tc.err, got, tc.code)
		}
	}
}
