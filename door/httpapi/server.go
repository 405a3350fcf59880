// Package httpapi is agent-runner's HTTP door: the seed routes
// (GET /health, POST /v1/jobs, GET /v1/jobs/{id}, GET /v1/jobs/{id}/artifacts)
// plus listing, cancel, artifact download, live events over SSE and
// WebSocket (one job's, and every job's and task's state on /v1/events),
// Prometheus metrics and the OpenAPI document. Requests become
// queued jobs; workers (package worker) run them. Error codes become HTTP
// statuses in exactly one place (errors.go). Before any route, every
// request passes guard.go (Host, Origin, a JSON or YAML body); serve
// caps connections per client IP with LimitConnsPerIP (conns.go).
package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/jobs"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// Scopes of the routes, re-exported from package auth for readability.
const (
	ScopeSubmit = auth.ScopeSubmit
	ScopeRead   = auth.ScopeRead
	ScopeCancel = auth.ScopeCancel
	ScopeAdmin  = auth.ScopeAdmin
)

// Config configures a Server.
type Config struct {
	// Jobs is the jobs service the routes call. When nil, New builds one
	// over Runner, Queue and WorkspaceRoots with the server's metrics as
	// its observer (tests and library use); serve builds it and shares it
	// with its other doors.
	Jobs   *jobs.Service
	Runner *runner.Runner
	Queue  *queue.Queue
	Logger *slog.Logger
	// Tokens, when non-nil, requires bearer tokens on every route but
	// /health and /openapi.json, including routes added with Handle or on
	// Mux.
	Tokens *auth.Tokens
	// MaxBodyBytes bounds request bodies (default 1 MiB).
	MaxBodyBytes int64
	// RequestTimeout bounds non-streaming requests (default 30 s).
	RequestTimeout time.Duration
	// KeepAlive is the interval of SSE comment lines on an idle stream
	// (default 15 s).
	KeepAlive time.Duration
	Registry  *prometheus.Registry
	Tracer    trace.Tracer
	// WorkspaceRoots, when set, is where a submitted workspace.path must
	// lie (validation.path_escape otherwise); serve always sets it, nil
	// leaves paths unchecked (library use).
	WorkspaceRoots *workspaceroot.Roots
	// ListenAddr is the address serve listens on: its host, unless a
	// wildcard, is served besides loopback's names (guard.go).
	ListenAddr string
	// AllowedHosts (--allowed-host: "name" for any port, or "name:port")
	// are further hosts a request's Host may name and an Origin may be.
	AllowedHosts []string
}

// Server serves the HTTP API.
type Server struct {
	cfg     Config
	jobs    *jobs.Service
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *Metrics
	hosts   hostPolicy
	// rawRoutes matches the routes declared with AcceptRawBody and
	// AcceptAnyBody.
	rawRoutes *http.ServeMux
	// selfAuth are the path prefixes declared with AuthenticatesItself.
	selfAuth []string
}

// New builds a Server and registers its routes.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("agent-runner")
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "http"), mux: http.NewServeMux(), rawRoutes: http.NewServeMux(), hosts: newHostPolicy(cfg.ListenAddr, cfg.AllowedHosts)}
	s.metrics = newMetrics(cfg.Registry, cfg.Queue)
	s.jobs = cfg.Jobs
	if s.jobs == nil {
		s.jobs = jobs.New(jobs.Config{Runner: cfg.Runner, Queue: cfg.Queue, Logger: cfg.Logger, Tracer: cfg.Tracer, WorkspaceRoots: cfg.WorkspaceRoots, Observer: s.metrics})
	}
	s.routes()
	return s
}

// Jobs is the jobs service behind the routes.
func (s *Server) Jobs() *jobs.Service { return s.jobs }

// Metrics returns the server's metrics, for the worker pool to feed.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Tracer is the tracer spans are recorded with.
func (s *Server) Tracer() trace.Tracer { return s.cfg.Tracer }

// Handler is the root handler. Every request passes guard first: a Host
// the server serves, no foreign Origin, a JSON or YAML body on a
// state-changing request; with tokens configured it also refuses every
// request without a known bearer token, except the public routes, before
// any route's own scope check; so a route mounted on Mux without Auth is
// still never anonymous.
func (s *Server) Handler() http.Handler {
	return s.guard(jsonMisses(s.mux))
}

// publicPaths need no token: the health check, the API document and the
// dashboard's static files (package ui: pages and scripts only, no data;
// its data routes live under /ui-api/, behind tokens). Exact paths, never
// a prefix.
var publicPaths = map[string]bool{"/health": true, "/openapi.json": true,
	"/": true, "/ui/": true, "/ui/app.js": true, "/ui/api.js": true, "/ui/dom.js": true, "/ui/jobs.js": true,
	"/ui/tasks.js": true, "/ui/overview.js": true, "/ui/term.js": true, "/ui/diff.js": true, "/ui/style.css": true,
	"/ui/agentruns.js": true, "/ui/sessions.js": true, "/ui/session.js": true, "/ui/sessionfiles.js": true,
	"/ui/sessionterm.js": true, "/ui/cspstyles.js": true,
	"/ui/vendor/xterm/xterm.mjs": true, "/ui/vendor/xterm/xterm.css": true, "/ui/vendor/xterm/LICENSE": true,
	"/ui/vendor/addon-fit/addon-fit.mjs": true, "/ui/vendor/addon-fit/LICENSE": true}

// Mux is the router other doors (task API, MCP) register on; wrap their
// handlers with Auth.
func (s *Server) Mux() *http.ServeMux { return s.mux }

// Handle registers an extra route (task API, MCP) behind the same auth.
func (s *Server) Handle(pattern, scope string, h http.Handler) {
	s.mux.Handle(pattern, s.Auth(scope, h))
}

// Auth wraps h so that it runs only for a bearer token holding scope
// (auth.unauthorized 401, auth.forbidden 403 otherwise; everything is
// allowed when the server has no tokens).
func (s *Server) Auth(scope string, h http.Handler) http.Handler {
	return s.auth(scope, h)
}

// route is one registered route; the OpenAPI test checks this list against
// the document.
type route struct {
	method, path, scope string
	streaming           bool
	h                   http.HandlerFunc
}

func (s *Server) table() []route {
	return []route{
		{"GET", "/health", "", false, s.health},
		{"POST", "/v1/jobs", ScopeSubmit, false, s.submit},
		{"GET", "/v1/jobs", ScopeRead, false, s.list},
		{"GET", "/v1/jobs/{job_id}", ScopeRead, false, s.get},
		{"DELETE", "/v1/jobs/{job_id}", ScopeCancel, false, s.cancel},
		{"GET", "/v1/jobs/{job_id}/artifacts", ScopeRead, false, s.artifacts},
		{"GET", "/v1/jobs/{job_id}/artifacts/{path...}", ScopeRead, true, s.download},
		{"GET", "/v1/jobs/{job_id}/egress", ScopeRead, false, s.egress},
		{"GET", "/v1/jobs/{job_id}/events", ScopeRead, true, s.events},
		{"GET", "/v1/jobs/{job_id}/ws", ScopeRead, true, s.websocket},
		{"GET", "/v1/events", ScopeRead, true, s.allEvents},
		{"GET", "/metrics", ScopeRead, false, s.metricsHandler},
		{"GET", "/openapi.json", "", false, s.openapi},
	}
}

func (s *Server) routes() {
	for _, r := range s.table() {
		var h http.Handler = r.h
		if !r.streaming {
			h = http.TimeoutHandler(h, s.cfg.RequestTimeout, `{"error":{"code":"internal.error","message":"request timed out"}}`)
		}
		if r.scope != "" {
			h = s.auth(r.scope, h)
		}
		s.mux.Handle(r.method+" "+r.path, s.logged(h))
	}
}

func (s *Server) auth(scope string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cfg.Tokens.Authorize(r, scope); err != nil {
			writeError(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

// Flush and Unwrap keep streaming and hijacking working through the recorder.
func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) logged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration_ms", time.Since(start).Milliseconds())
	})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// RouteInfo names one served route.
type RouteInfo struct{ Method, Path string }

// Routes lists the routes New registers (used by the OpenAPI test).
func Routes() []RouteInfo {
	var s Server
	var out []RouteInfo
	for _, r := range s.table() {
		out = append(out, RouteInfo{r.method, r.path})
	}
	return out
}
