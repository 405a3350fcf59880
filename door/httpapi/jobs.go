package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/jobs"
)

// The bodies of the job routes are the jobs service's types.
type (
	// Accepted is the 202 body of POST /v1/jobs.
	Accepted = jobs.Accepted
	// JobStatus is the body of GET /v1/jobs/{id} before the job is
	// terminal.
	JobStatus = jobs.Status
	// JobList is the body of GET /v1/jobs.
	JobList = jobs.Page
)

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeError(w, job.Errorf(job.CodeBodyTooLarge, "request body is larger than %d bytes", s.cfg.MaxBodyBytes))
		return
	}
	if err != nil {
		writeError(w, job.Wrap(job.CodeInvalidRequest, err, "cannot read request body"))
		return
	}
	req, err := job.DecodeRequest(data)
	if err != nil {
		writeError(w, err)
		return
	}
	// W3C traceparent joins the caller's trace; its trace id becomes
	// trace.trace_id when the request names none.
	ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && req.Trace.String(job.TraceID) == "" {
		req.Trace = req.Trace.WithString(job.TraceID, sc.TraceID().String())
	}
	ns, err := s.cacheNamespace(r)
	if err != nil {
		writeError(w, err)
		return
	}
	acc, created, err := s.jobs.SubmitAs(ctx, ns, req)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusAccepted
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, acc)
}

// cacheNamespace is the namespace of the caller's build caches: its
// bearer token's name (an unnamed token has none, and its jobs may not
// name caches), or the host's local one when the server has no tokens
// (loopback only).
func (s *Server) cacheNamespace(r *http.Request) (string, error) {
	if s.cfg.Tokens == nil {
		return buildcache.LocalNamespace, nil
	}
	name, err := s.cfg.Tokens.Authenticate(r)
	if err != nil {
		return "", err
	}
	return buildcache.TokenNamespace(name), nil
}

// get returns the status, or the result once terminal. With ?wait=DURATION
// (at most 25 s) it long-polls: it answers as soon as the job is terminal
// or the wait ends.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > jobs.MaxLongPoll {
			writeError(w, job.Errorf(job.CodeInvalidRequest, "wait must be a duration up to 25s"))
			return
		}
		// Answer before the request timeout cuts the long poll off.
		wait = max(0, min(d, s.cfg.RequestTimeout-time.Second))
	}
	v, err := s.jobs.Get(r.Context(), r.PathValue("job_id"), wait)
	writeView(w, v, err)
}

func writeView(w http.ResponseWriter, v jobs.View, err error) {
	switch {
	case err != nil:
		writeError(w, err)
	case v.Result != nil:
		writeJSON(w, http.StatusOK, v.Result)
	default:
		writeJSON(w, http.StatusOK, v.Status)
	}
}

// list pages through jobs in id order. Filters: status=a,b;
// trace.<key>=value; limit (1..1000); cursor.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := jobs.Filter{After: q.Get("cursor"), Trace: map[string]string{}}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, job.Errorf(job.CodeInvalidRequest, "limit must be between 1 and %d", jobs.MaxListLimit))
			return
		}
		f.Limit = n
	}
	for _, v := range strings.Split(q.Get("status"), ",") {
		if v != "" {
			f.Statuses = append(f.Statuses, job.Status(v))
		}
	}
	for k, vs := range q {
		if key, ok := strings.CutPrefix(k, "trace."); ok {
			f.Trace[key] = vs[0]
		}
	}
	page, err := s.jobs.List(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// cancel stops a job (see jobs.Service.Cancel): 200 with the result once
// terminal, 202 with the status while a running job's kill goes on. A
// token that may cancel but not read gets the status only (200 once
// terminal): never the result's output, artifacts or error.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	v, err := s.jobs.Cancel(r.Context(), r.PathValue("job_id"))
	switch {
	case err == nil && v.Result == nil:
		writeJSON(w, http.StatusAccepted, v.Status)
	case err == nil && s.cfg.Tokens.Authorize(r, ScopeRead) != nil:
		writeJSON(w, http.StatusOK, v.Status)
	default:
		writeView(w, v, err)
	}
}

func (s *Server) artifacts(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("job_id")
	list, err := s.jobs.Artifacts(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"job_id": id, "artifacts": list})
}

// egress serves the job's recorded egress decisions (jobs.Egress).
func (s *Server) egress(w http.ResponseWriter, r *http.Request) {
	log, err := s.jobs.Egress(r.PathValue("job_id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, log)
}

// download serves one recorded artifact, with its SHA-256 in
// X-Content-SHA256 and Digest.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	f, a, modified, err := s.jobs.OpenArtifact(r.PathValue("job_id"), r.PathValue("path"))
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-SHA256", a.SHA256)
	w.Header().Set("Digest", "sha-256="+a.SHA256)
	http.ServeContent(w, r, a.Path[strings.LastIndex(a.Path, "/")+1:], modified, f)
}
