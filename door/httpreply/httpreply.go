// Package httpreply is the one place job error codes become HTTP statuses,
// and the one way the HTTP doors (the job API, the task API, capability
// runs, the dashboard) write a JSON body or an error: {"error": {code,
// message, details}} with the mapped status. It knows no door.
package httpreply

import (
	"net/http"

	"github.com/agent-runner/agent-runner/job"
)

// Status maps a job error code to its HTTP status. A job's policy denials
// are terminal results, not errors; a policy refusal that keeps a
// submission from being accepted at all (a task whose network the
// operator's ceiling refuses) is 403: retrying the same request cannot
// help.
func Status(c job.Code) int {
	switch c {
	case job.CodeBodyTooLarge, job.CodeImageTooLarge:
		return http.StatusRequestEntityTooLarge
	case job.CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case job.CodeJobNotFound, job.CodeImageNotFound:
		return http.StatusNotFound
	case job.CodeImageInvalid, job.CodeImageUnsafeEntry:
		return http.StatusUnprocessableEntity
	case job.CodeJobConflict, job.CodeNotTerminal, job.CodeSessionNotRunning, job.CodeSessionNoTerminal, job.CodeDirectoryNotEmpty:
		return http.StatusConflict
	case job.CodeRangeNotSatisfiable:
		return http.StatusRequestedRangeNotSatisfiable
	case job.CodeQueueFull, job.CodeQueueClosed:
		return http.StatusServiceUnavailable
	case job.CodeSessionLimit:
		return http.StatusTooManyRequests
	case job.CodeSessionPortUnreachable:
		return http.StatusBadGateway
	case job.CodeSessionWorkerLost:
		return http.StatusGone
	case job.CodeUnauthorized:
		return http.StatusUnauthorized
	case job.CodeForbidden:
		return http.StatusForbidden
	}
	switch c.Class() {
	case "validation":
		return http.StatusUnprocessableEntity
	case "policy":
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

// Error writes {"error": {...}} with the mapped status. A 503 says when to
// retry; a 401 names the scheme and closes the connection (one that failed
// authentication is not kept alive).
func Error(w http.ResponseWriter, err error) {
	jerr := job.AsError(err)
	status := Status(jerr.Code)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-runner"`)
		w.Header().Set("Connection", "close")
	}
	JSON(w, status, map[string]any{"error": jerr})
}

// JSON writes v as indented JSON with status.
func JSON(w http.ResponseWriter, status int, v any) {
	b, err := job.MarshalIndent(v)
	if err != nil {
		http.Error(w, `{"error":{"code":"internal.error","message":"encoding failed"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
