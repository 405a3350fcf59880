package httpapi

import (
	"net/http"

	"github.com/agent-runner/agent-runner/job"
)

// CodeUnsupportedMediaType: a state-changing request's body is not JSON
// or YAML (415; docs/api.md "HTTP conventions").
const CodeUnsupportedMediaType job.Code = "validation.unsupported_media_type"

// httpStatus is the one place job error codes become HTTP statuses.
// A job's policy denials are terminal results, not errors; a policy
// refusal that keeps a submission from being accepted at all (a task
// whose network the operator's ceiling refuses) is 403: retrying the
// same request cannot help.
func httpStatus(c job.Code) int {
	switch c {
	case job.CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case job.CodeJobNotFound:
		return http.StatusNotFound
	case job.CodeJobConflict, job.CodeNotTerminal:
		return http.StatusConflict
	case job.CodeQueueFull, job.CodeQueueClosed:
		return http.StatusServiceUnavailable
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

// WriteError writes {"error": {...}} with the mapped status; other HTTP
// doors mounted by serve (the task API) answer through it too.
func WriteError(w http.ResponseWriter, err error) { writeError(w, err) }

// writeError writes {"error": {...}} with the mapped status.
func writeError(w http.ResponseWriter, err error) {
	jerr := job.AsError(err)
	status := httpStatus(jerr.Code)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-runner"`)
		// A connection that failed authentication is not kept alive.
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, status, map[string]any{"error": jerr})
}

// WriteJSON writes v as indented JSON with status; other doors mounted
// by serve answer through it too.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := job.MarshalIndent(v)
	if err != nil {
		http.Error(w, `{"error":{"code":"internal.error","message":"encoding failed"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
