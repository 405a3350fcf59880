package ui

import (
	"net/http"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/store"
)

// Config is what Mount needs from serve.
type Config struct {
	// Mux is serve's router, behind its root token check.
	Mux *http.ServeMux
	// Auth wraps a handler so it runs only for a token holding scope.
	Auth func(scope string, h http.Handler) http.Handler
	// Store is the job run store (for a job's request).
	Store *store.Store
}

// Mount registers the dashboard on cfg.Mux: the pages at /ui/, GET /
// redirecting there, and the read route under /ui-api/ (scope read). The
// task page reads the task API's stream route itself (fetch, with the
// Authorization header, as Server-Sent Events).
func Mount(cfg Config) {
	cfg.Mux.Handle("GET /{$}", http.RedirectHandler(Prefix, http.StatusFound))
	cfg.Mux.Handle("GET "+Prefix, files())
	cfg.Mux.Handle("GET /ui-api/jobs/{job_id}/request", cfg.Auth(auth.ScopeRead, jobRequest(cfg.Store)))
}
