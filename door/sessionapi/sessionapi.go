// Package sessionapi is serve's sessions door: the HTTP routes of
// /v1/sandboxes over the session service (package session), which keeps
// the sandboxes, runs their execs and moves their files. The door reads
// requests, calls the service and writes its answers; every route needs
// the token scope "sessions" (docs/sessions.md).
package sessionapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/door/httpreply"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// MaxBodyBytes bounds a JSON request (an exec's stdin included).
const MaxBodyBytes = 4 << 20

type route struct {
	pattern string
	h       func(*session.Service, http.ResponseWriter, *http.Request)
	// raw says the route's body is raw bytes (application/octet-stream),
	// not JSON: RawBodyPatterns. anyBody says it may be of any type
	// (the ports proxy): AnyBodyPatterns.
	raw, anyBody bool
}

var routes = append([]route{
	{pattern: "POST /v1/sandboxes", h: serveCreate},
	{pattern: "GET /v1/sandboxes", h: serveList},
	{pattern: "GET /v1/sandboxes/{id}", h: serveGet},
	{pattern: "DELETE /v1/sandboxes/{id}", h: serveDelete},
	{pattern: "GET /v1/sandboxes/{id}/audit", h: serveAudit},
	{pattern: "POST /v1/sandboxes/{id}/timeout", h: serveTimeout},
	{pattern: "POST /v1/sandboxes/{id}/pause", h: servePause},
	{pattern: "POST /v1/sandboxes/{id}/resume", h: serveResume},
	{pattern: "POST /v1/sandboxes/{id}/exec", h: serveExec},
	{pattern: EventsPattern, h: serveEvents},
	{pattern: "GET /v1/sandboxes/{id}/files", h: serveGetFiles},
	{pattern: "PUT /v1/sandboxes/{id}/files", h: serveWriteFile, raw: true},
	{pattern: "DELETE /v1/sandboxes/{id}/files", h: serveRemoveFile},
	{pattern: "GET /v1/sandboxes/{id}/files/stat", h: serveStatFile},
	{pattern: "POST /v1/sandboxes/{id}/files/move", h: serveMoveFile},
	{pattern: "POST /v1/sandboxes/{id}/processes", h: serveStartProcess},
	{pattern: "GET /v1/sandboxes/{id}/processes", h: serveListProcesses},
	{pattern: "GET /v1/sandboxes/{id}/processes/{pid}", h: serveGetProcess},
	{pattern: "DELETE /v1/sandboxes/{id}/processes/{pid}", h: serveKillProcess},
	{pattern: "POST /v1/sandboxes/{id}/processes/{pid}/stdin", h: serveStdin, raw: true},
	{pattern: "POST /v1/sandboxes/{id}/processes/{pid}/signal", h: serveSignal},
	{pattern: "POST /v1/sandboxes/{id}/processes/{pid}/resize", h: serveResize},
	{pattern: "GET /v1/sandboxes/{id}/processes/{pid}/events", h: serveProcessEvents},
	{pattern: "GET /v1/sandboxes/{id}/processes/{pid}/ws", h: serveProcessSocket},
}, portRoutes()...)

// Routes registers the sessions routes over s on mux, each wrapped with
// wrap(auth.ScopeSessions, h) (serve's Auth).
func Routes(mux *http.ServeMux, s *session.Service, wrap func(scope string, h http.Handler) http.Handler) {
	for _, r := range routes {
		h := r.h
		mux.Handle(r.pattern, wrap(auth.ScopeSessions, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { h(s, w, req) })))
	}
}

// RawBodyPatterns lists the routes whose body is raw bytes (a file's
// write, a process's input), for the server's guard to let
// application/octet-stream through on them (httpapi.Server.AcceptRawBody).
func RawBodyPatterns() []string {
	var out []string
	for _, r := range routes {
		if r.raw {
			out = append(out, r.pattern)
		}
	}
	return out
}

// AnyBodyPatterns lists the routes whose body may have any content
// type (the ports proxy: the sandbox's server decides what it takes),
// for the server's guard to let them through
// (httpapi.Server.AcceptAnyBody).
func AnyBodyPatterns() []string {
	var out []string
	for _, r := range routes {
		if r.anyBody {
			out = append(out, r.pattern)
		}
	}
	return out
}

// Patterns lists the routes Routes registers ("METHOD /path").
func Patterns() []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.pattern
	}
	return out
}

// decode reads a JSON body into v (an empty body leaves v as it is).
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			httpreply.Error(w, job.Errorf(job.CodeBodyTooLarge, "body is larger than %d bytes", MaxBodyBytes))
			return false
		}
		httpreply.Error(w, job.Wrap(job.CodeInvalidRequest, err, "cannot read body"))
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		httpreply.Error(w, job.Wrap(job.CodeInvalidRequest, err, "body is not the JSON this route takes"))
		return false
	}
	return true
}

// reply writes rec, or err.
func reply(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		httpreply.Error(w, err)
		return
	}
	httpreply.JSON(w, status, v)
}

func serveCreate(s *session.Service, w http.ResponseWriter, r *http.Request) {
	var req session.CreateRequest
	if !decode(w, r, &req) {
		return
	}
	rec, created, err := s.Create(r.Context(), req)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/sandboxes/"+rec.ID)
	}
	reply(w, status, rec, err)
}

func serveList(s *session.Service, w http.ResponseWriter, r *http.Request) {
	f := session.Filter{State: session.State(r.URL.Query().Get("state")), Metadata: map[string]string{}}
	for k, vs := range r.URL.Query() {
		if key, ok := strings.CutPrefix(k, "metadata."); ok && len(vs) > 0 {
			f.Metadata[key] = vs[0]
		}
	}
	recs, err := s.List(f)
	reply(w, http.StatusOK, map[string]any{"sandboxes": recs}, err)
}

func serveGet(s *session.Service, w http.ResponseWriter, r *http.Request) {
	rec, err := s.Get(r.PathValue("id"))
	reply(w, http.StatusOK, rec, err)
}

func serveDelete(s *session.Service, w http.ResponseWriter, r *http.Request) {
	rec, err := s.Delete(r.Context(), r.PathValue("id"))
	reply(w, http.StatusOK, rec, err)
}

// serveAudit answers the sandbox's audit log (session.AuditFile) as it
// is on disk, one JSON event per line, live or ended.
func serveAudit(s *session.Service, w http.ResponseWriter, r *http.Request) {
	b, err := s.AuditLog(r.PathValue("id"))
	if err != nil {
		httpreply.Error(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

func serveTimeout(s *session.Service, w http.ResponseWriter, r *http.Request) {
	var req struct {
		TimeoutS int64 `json:"timeout_s"`
	}
	if !decode(w, r, &req) {
		return
	}
	rec, err := s.SetTimeout(r.PathValue("id"), req.TimeoutS)
	reply(w, http.StatusOK, rec, err)
}

func servePause(s *session.Service, w http.ResponseWriter, r *http.Request) {
	rec, err := s.Pause(r.Context(), r.PathValue("id"))
	reply(w, http.StatusOK, rec, err)
}

func serveResume(s *session.Service, w http.ResponseWriter, r *http.Request) {
	rec, err := s.Resume(r.Context(), r.PathValue("id"))
	reply(w, http.StatusOK, rec, err)
}

func serveExec(s *session.Service, w http.ResponseWriter, r *http.Request) {
	var req session.ExecRequest
	if !decode(w, r, &req) {
		return
	}
	res, err := s.Exec(r.Context(), r.PathValue("id"), req)
	reply(w, http.StatusOK, res, err)
}

func serveWriteFile(s *session.Service, w http.ResponseWriter, r *http.Request) {
	mode := int64(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		v, err := strconv.ParseInt(m, 8, 32)
		if err != nil || v < 0 || v > 0o777 {
			httpreply.Error(w, job.Errorf(job.CodeInvalidRequest, "mode must be octal permission bits (644, 0755)").With("field", "mode"))
			return
		}
		mode = v
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.MaxFileBytes()+1))
	if err != nil {
		httpreply.Error(w, job.Errorf(job.CodeBodyTooLarge, "a file may hold at most %d bytes", s.MaxFileBytes()).With("max", s.MaxFileBytes()))
		return
	}
	id, path := r.PathValue("id"), r.URL.Query().Get("path")
	if err := s.WriteFile(r.Context(), id, path, data, fs.FileMode(mode).Perm()); err != nil {
		httpreply.Error(w, err)
		return
	}
	httpreply.JSON(w, http.StatusOK, map[string]any{"path": path, "size_bytes": len(data)})
}
