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
//     JSON or YAML (a sandbox file upload may send
//     application/octet-stream): 415 validation.unsupported_media_type.
//
// Refusals of 1 to 3 close the connection.
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
		if s.cfg.Tokens != nil && !publicPaths[r.URL.Path] {
			if _, err := s.cfg.Tokens.Authenticate(r); err != nil {
				writeError(w, err)
				return
			}
		}
		if err := checkContentType(r); err != nil {
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
// names a Content-Type) that is not JSON or YAML; a request without body
// or Content-Type (DELETE, POST .../destroy) passes.
func checkContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if !stateChanging[r.Method] || (r.ContentLength == 0 && ct == "") {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (bodyTypes[mt] || strings.HasSuffix(mt, "+json") || (mt == rawType && fileUpload(r))) {
		return nil
	}
	msg := "a request body needs Content-Type application/json or application/yaml"
	if ct != "" {
		msg += ", not " + ct
	}
	return job.Errorf(job.CodeUnsupportedMediaType, "%s", msg).With("content_type", ct)
}

// rawType is the media type of a file upload's raw bytes: not a CORS
// "simple" type either, so a browser preflights it.
const rawType = "application/octet-stream"

// fileUpload reports whether r is one of the two routes whose body is
// raw bytes (door/sessionapi): a sandbox file's write (PUT
// /v1/sandboxes/{id}/files) or a process's input (POST
// /v1/sandboxes/{id}/processes/{pid}/stdin).
func fileUpload(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/sandboxes/")
	id, tail, _ := strings.Cut(rest, "/")
	if !ok || id == "" {
		return false
	}
	if r.Method == http.MethodPut && tail == "files" {
		return true
	}
	pid, input, _ := strings.Cut(strings.TrimPrefix(tail, "processes/"), "/")
	return r.Method == http.MethodPost && strings.HasPrefix(tail, "processes/") && pid != "" && input == "stdin"
}
