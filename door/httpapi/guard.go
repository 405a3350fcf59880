package httpapi

import (
	"mime"
	"net/http"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// guard runs the checks every request passes before any route, with or
// without tokens, so that a web page the operator opens cannot drive the
// API (CSRF, DNS rebinding):
//
//  1. Host must name a served host (loopback, the listen address's host,
//     Config.AllowedHosts): 403 auth.forbidden, details.reason "host".
//  2. An Origin header, when present, must be the request's own origin or
//     name an allowed host: 403 auth.forbidden, details.reason "origin".
//  3. With tokens, a known bearer token (outside publicPaths): 401.
//  4. A state-changing request with a body or a Content-Type must send
//     JSON or YAML (a route a door declared with AcceptRawBody may send
//     application/octet-stream, one declared with AcceptAnyBody any
//     type): 415 validation.unsupported_media_type.
//
// Refusals of 1 to 3 close the connection. Under a prefix a door declared
// with AuthenticatesItself, 3 and 4 are the door's.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts.servesHost(r.Host) {
			w.Header().Set("Connection", "close")
			writeError(w, job.Errorf(job.CodeForbidden, "this server does not serve host %q; the operator may add it with --allowed-host", r.Host).
				With("reason", "host").With("host", r.Host))
			return
		}
		if origins, ok := r.Header["Origin"]; ok && (len(origins) != 1 || !s.hosts.originAllowed(origins[0], r)) {
			origin := strings.Join(origins, ", ")
			w.Header().Set("Connection", "close")
			writeError(w, job.Errorf(job.CodeForbidden, "cross-origin request from %q refused", origin).
				With("reason", "origin").With("origin", origin))
			return
		}
		if s.selfAuthenticated(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if s.cfg.Tokens != nil && !publicPaths[r.URL.Path] {
			if _, err := s.cfg.Tokens.Authenticate(r); err != nil {
				writeError(w, err)
				return
			}
		}
		if err := checkContentType(r, s.rawBody); err != nil && !s.anyBody(r) {
			writeError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// stateChanging are the methods whose bodies must be JSON or YAML.
var stateChanging = map[string]bool{http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true}

// bodyTypes are the media types a state-changing body may have, besides
// any "+json" suffix. None of them is a CORS "simple" type, so a browser
// never sends one cross-origin without a preflight this server refuses.
var bodyTypes = map[string]bool{"application/json": true, "application/yaml": true, "application/x-yaml": true, "text/yaml": true}

// checkContentType refuses a state-changing request that has a body (or
// names a Content-Type) that is not JSON or YAML, or raw bytes where raw
// reports the route takes them; a request without body or Content-Type
// (DELETE, POST .../destroy) passes.
func checkContentType(r *http.Request, raw func(*http.Request) bool) error {
	ct := r.Header.Get("Content-Type")
	if !stateChanging[r.Method] || (r.ContentLength == 0 && ct == "") {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (bodyTypes[mt] || strings.HasSuffix(mt, "+json") || (mt == rawType && raw(r))) {
		return nil
	}
	msg := "a request body needs Content-Type application/json or application/yaml"
	if ct != "" {
		msg += ", not " + ct
	}
	return job.Errorf(job.CodeUnsupportedMediaType, "%s", msg).With("content_type", ct)
}

// rawType is the media type of raw bytes (a file upload, a process's
// input): not a CORS "simple" type either, so a browser preflights it.
const rawType = "application/octet-stream"

// AcceptRawBody lets the routes of pattern (a mux pattern such as "PUT
// /v1/sandboxes/{id}/files") take application/octet-stream bodies past
// the guard: the door that serves raw bytes declares them, and every
// other route still takes JSON or YAML only.
func (s *Server) AcceptRawBody(pattern string) {
	s.rawRoutes.Handle(pattern, http.NotFoundHandler())
}

// rawBody reports whether r's route was declared with AcceptRawBody.
func (s *Server) rawBody(r *http.Request) bool {
	_, pattern := s.rawRoutes.Handler(r)
	return pattern != ""
}

// anyBodyRoute marks, in rawRoutes, a route declared with AcceptAnyBody.
type anyBodyRoute struct{ http.Handler }

// AcceptAnyBody lets the routes of pattern take a body of any content
// type past the guard: a proxy into a sandbox (the sessions door's
// ports route), whose server decides what it takes. The Host, Origin
// and token checks still hold for them: a browser page of another
// origin that posts a form there is refused by its Origin header, and
// with tokens by their absence.
func (s *Server) AcceptAnyBody(pattern string) {
	s.rawRoutes.Handle(pattern, anyBodyRoute{http.NotFoundHandler()})
}

// anyBody reports whether r's route was declared with AcceptAnyBody.
func (s *Server) anyBody(r *http.Request) bool {
	h, pattern := s.rawRoutes.Handler(r)
	_, ok := h.(anyBodyRoute)
	return pattern != "" && ok
}

// AuthenticatesItself hands the token and body checks of every path
// under prefix ("/e2b") to the door mounted there: one whose clients
// send no bearer token (the E2B-compatible API's X-API-Key and sandbox
// access tokens) and bodies of their own types (Connect-RPC, multipart
// uploads). The door must authenticate every request and refuse what a
// browser could send cross-origin unauthenticated.
func (s *Server) AuthenticatesItself(prefix string) {
	s.selfAuth = append(s.selfAuth, strings.TrimSuffix(prefix, "/"))
}

// selfAuthenticated reports whether path is under a prefix declared
// with AuthenticatesItself.
func (s *Server) selfAuthenticated(path string) bool {
	for _, p := range s.selfAuth {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
