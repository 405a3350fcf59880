package e2bapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// This file is the one place the door's errors take E2B's shapes: the
// control plane's and envd's HTTP {"code": status, "message"}, and
// envd's Connect codes, which the SDKs turn into their error classes
// (404 NotFoundError, 401 AuthenticationError, 429 RateLimitError...).

// unsupported is a request for something E2B offers and this server
// does not (yet): 501 on HTTP, Unimplemented over Connect, with a
// message that names it.
type unsupported struct{ what string }

func (e *unsupported) Error() string {
	return e.what + " is not supported by agent-runner's E2B-compatible API"
}

// Errors of the polled watchers.
var (
	errNoWatcher  = errors.New("no such watcher in this sandbox")
	errWatchEnded = errors.New("the watcher's directory or sandbox is gone")
)

// notSupported says that what is not supported.
func notSupported(what string) error { return &unsupported{what: what} }

// httpStatus is the HTTP status of err.
func httpStatus(err error) int {
	var u *unsupported
	if errors.As(err, &u) {
		return http.StatusNotImplemented
	}
	jerr := job.AsError(err)
	switch jerr.Code {
	case job.CodeJobNotFound:
		return http.StatusNotFound
	case job.CodeUnauthorized:
		return http.StatusUnauthorized
	case job.CodeForbidden:
		return http.StatusForbidden
	case job.CodeSessionLimit:
		return http.StatusTooManyRequests
	case job.CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case job.CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case job.CodeJobConflict, job.CodeSessionNoTerminal, job.CodeDirectoryNotEmpty:
		return http.StatusConflict
	case job.CodeBackendUnavail:
		return http.StatusServiceUnavailable
	case job.CodeSessionNotRunning:
		if ended(jerr) {
			// envd's answer for a sandbox that is gone, which the SDKs
			// read as "not running".
			return http.StatusBadGateway
		}
		return http.StatusConflict
	}
	switch jerr.Code.Class() {
	case "validation":
		return http.StatusBadRequest
	case "policy":
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

// ended reports whether a session.not_running error is about a sandbox
// that ended (not a paused one, not a process).
func ended(jerr *job.Error) bool {
	st, _ := jerr.Details["state"].(string)
	return session.State(st) != session.StatePaused && session.State(st) != "" && st != session.ProcessExited
}

// processExited reports whether err is about a process that ended.
func processExited(jerr *job.Error) bool {
	st, _ := jerr.Details["state"].(string)
	return jerr.Code == job.CodeSessionNotRunning && st == session.ProcessExited
}

// message is err's text for a client: a job error's message (with its
// cause and code), or the error's own.
func message(err error) string {
	var u *unsupported
	if errors.As(err, &u) {
		return u.Error()
	}
	jerr := job.AsError(err)
	msg := jerr.Message
	if cause, ok := jerr.Details["cause"].(string); ok {
		msg += ": " + cause
	}
	return msg + " (" + string(jerr.Code) + ")"
}

// writeHTTPError answers err as E2B's APIs do: {"code": status,
// "message"}.
func writeHTTPError(w http.ResponseWriter, err error) {
	status := httpStatus(err)
	writeJSON(w, status, map[string]any{"code": status, "message": message(err)})
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":500,"message":"cannot encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// rpcError is err as a Connect error.
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	var cerr *connect.Error
	if errors.As(err, &cerr) {
		return cerr
	}
	var u *unsupported
	if errors.As(err, &u) {
		return connect.NewError(connect.CodeUnimplemented, u)
	}
	jerr := job.AsError(err)
	return connect.NewError(rpcCode(jerr), errors.New(message(jerr)))
}

// rpcCode is a job error's Connect code.
func rpcCode(jerr *job.Error) connect.Code {
	switch jerr.Code {
	case job.CodeJobNotFound:
		return connect.CodeNotFound
	case job.CodeUnauthorized:
		return connect.CodeUnauthenticated
	case job.CodeForbidden:
		return connect.CodePermissionDenied
	case job.CodeSessionLimit:
		return connect.CodeResourceExhausted
	case job.CodeJobConflict:
		return connect.CodeAlreadyExists
	case job.CodeSessionNoTerminal, job.CodeDirectoryNotEmpty:
		return connect.CodeFailedPrecondition
	case job.CodeBackendUnavail:
		return connect.CodeUnavailable
	case job.CodeRunCanceled:
		return connect.CodeCanceled
	case job.CodeSessionNotRunning:
		switch {
		case processExited(jerr):
			return connect.CodeNotFound
		case ended(jerr):
			return connect.CodeUnavailable
		}
		return connect.CodeFailedPrecondition
	}
	switch jerr.Code.Class() {
	case "validation":
		return connect.CodeInvalidArgument
	case "policy":
		return connect.CodePermissionDenied
	}
	return connect.CodeInternal
}
