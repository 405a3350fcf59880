package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/telemetry"
)

// Accepted is the 202 body of POST /v1/jobs.
type Accepted struct {
	JobID  string     `json:"job_id"`
	Status job.Status `json:"status"`
}

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
	acc, created, err := s.Submit(ctx, req)
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

// Submit queues req exactly as POST /v1/jobs does: validate and normalize
// (job_<uuid> id when empty), record request.json and status.json
// "queued", publish to the queue. It reports whether the job was created;
// a job_id already used by the same request is returned as it is (false),
// by a different request it is job.conflict. A full queue is queue.full
// and leaves no record behind. Other doors (MCP, task API) call it
// in-process.
func (s *Server) Submit(ctx context.Context, req *job.Request) (Accepted, bool, error) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = telemetry.JobContext(ctx, *req)
	}
	ctx, span := s.cfg.Tracer.Start(ctx, "job.submit")
	defer span.End()
	if err := s.admit(req); err != nil {
		s.metrics.rejected(job.CodeOf(err))
		return Accepted{}, false, err
	}
	if err := s.cfg.Runner.Prepare(req); err != nil {
		s.metrics.rejected(job.CodeOf(err))
		return Accepted{}, false, err
	}
	span.SetAttributes(attribute.String(telemetry.KeyJobID, req.JobID))
	st := s.cfg.Runner.Store()
	// The claim is atomic: of concurrent submits of one id one creates the
	// record; the others find the complete request and compare it.
	created, err := st.Claim(*req, store.StatusRecord{JobID: req.JobID, Status: job.StatusQueued, Backend: req.Backend.Kind})
	if job.CodeOf(err) == job.CodeJobConflict {
		return Accepted{}, false, err
	}
	if err != nil {
		s.metrics.rejected(job.CodeOf(err))
		return Accepted{}, false, err // nothing was created
	}
	if !created {
		return s.resubmit(*req), false, nil
	}
	// The queued event goes out before the job can reach a worker, so it
	// always precedes "running" in the event stream.
	_ = s.cfg.Queue.Publish(queue.Event{Type: queue.EventStatus, JobID: req.JobID, Status: job.StatusQueued})
	payload, _ := json.Marshal(req)
	if err := s.cfg.Queue.Enqueue(ctx, req.JobID, payload); err != nil {
		_ = st.Remove(req.JobID) // nothing half-accepted stays behind
		s.metrics.rejected(job.CodeOf(err))
		return Accepted{}, false, err
	}
	s.metrics.accepted(req.Backend.Kind)
	s.log.Info("job accepted", telemetry.KeyJobID, req.JobID, telemetry.KeyTraceID, req.Trace.String(job.TraceID), "backend", req.Backend.Kind)
	return Accepted{JobID: req.JobID, Status: job.StatusQueued}, true, nil
}

// admit holds a submitted workspace.path to the operator's workspace
// roots, before anything else looks at the path (so whether a file exists
// outside them is not disclosed), and replaces it with the resolved path it
// checked.
func (s *Server) admit(req *job.Request) error {
	if s.cfg.WorkspaceRoots == nil || req.Workspace.Path == "" {
		return nil
	}
	real, err := s.cfg.WorkspaceRoots.Check(req.Workspace.Path)
	if err != nil {
		return job.AsError(err).With("field", "workspace.path")
	}
	req.Workspace.Path = real
	return nil
}

// resubmit answers a submit of the request already stored under its
// job_id (store.Claim compared them): the job as it stands.
func (s *Server) resubmit(req job.Request) Accepted {
	status := job.StatusQueued
	if rec, err := s.cfg.Runner.Store().ReadStatus(req.JobID); err == nil {
		status = rec.Status
	}
	return Accepted{JobID: req.JobID, Status: status}
}

// Wait blocks until job id is terminal and returns its result (job.not_found
// for an unknown id; ctx's error when it ends first).
func (s *Server) Wait(ctx context.Context, id string) (job.Result, error) {
	st := s.cfg.Runner.Store()
	if _, err := st.ReadStatus(id); err != nil {
		return job.Result{}, job.Errorf(job.CodeJobNotFound, "job not found").With("job_id", id)
	}
	var res job.Result
	done := func() bool {
		var err error
		res, err = st.ReadResult(id)
		return err == nil
	}
	for !done() {
		// WaitTerminal returns on the terminal event; the loop re-reads
		// the record, which the worker writes before publishing.
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.cfg.Queue.WaitTerminal(wctx, id, done)
		cancel()
		if ctx.Err() != nil {
			return job.Result{}, ctx.Err()
		}
		if err != nil && wctx.Err() == nil {
			return job.Result{}, err
		}
	}
	return res, nil
}

// JobStatus is the body of GET /v1/jobs/{id} before the job is terminal.
type JobStatus struct {
	JobID     string     `json:"job_id"`
	Status    job.Status `json:"status"`
	Attempt   int        `json:"attempt,omitempty"`
	Backend   string     `json:"backend,omitempty"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// get returns the status, or the result once terminal. With ?wait=DURATION
// (at most 25 s) it long-polls: it answers as soon as the job is terminal
// or the wait ends.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("job_id")
	st := s.cfg.Runner.Store()
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 25*time.Second {
			writeError(w, job.Errorf(job.CodeInvalidRequest, "wait must be a duration up to 25s"))
			return
		}
		// Answer before the request timeout cuts the long poll off.
		d = min(d, s.cfg.RequestTimeout-time.Second)
		if _, err := st.ReadStatus(id); err == nil && d > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			_ = s.cfg.Queue.WaitTerminal(ctx, id, func() bool { _, err := st.ReadResult(id); return err == nil })
			cancel()
		}
	}
	if res, err := st.ReadResult(id); err == nil {
		writeJSON(w, http.StatusOK, res)
		return
	}
	rec, err := st.ReadStatus(id)
	if err != nil {
		writeError(w, job.Errorf(job.CodeJobNotFound, "job not found").With("job_id", id))
		return
	}
	writeJSON(w, http.StatusOK, JobStatus{JobID: id, Status: rec.Status, Attempt: rec.Attempt, Backend: rec.Backend, UpdatedAt: rec.UpdatedAt})
}

// JobList is the body of GET /v1/jobs.
type JobList struct {
	Jobs       []JobStatus `json:"jobs"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// list pages through jobs in id order (ids are time-ordered UUIDv7s).
// Filters: status=a,b; trace.<key>=value; limit (<= 1000); cursor.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, job.Errorf(job.CodeInvalidRequest, "limit must be between 1 and 1000"))
			return
		}
		limit = n
	}
	var statuses []job.Status
	for _, v := range strings.Split(q.Get("status"), ",") {
		if v == "" {
			continue
		}
		if !job.Status(v).Valid() {
			writeError(w, job.Errorf(job.CodeInvalidRequest, "unknown status %q", v))
			return
		}
		statuses = append(statuses, job.Status(v))
	}
	traceFilter := map[string]string{}
	for k, vs := range q {
		if key, ok := strings.CutPrefix(k, "trace."); ok {
			traceFilter[key] = vs[0]
		}
	}
	st := s.cfg.Runner.Store()
	ids, err := st.List()
	if err != nil {
		writeError(w, err)
		return
	}
	cursor := q.Get("cursor")
	out := JobList{Jobs: []JobStatus{}}
	for _, id := range ids {
		if cursor != "" && id <= cursor {
			continue
		}
		rec, err := st.ReadStatus(id)
		if err != nil || (len(statuses) > 0 && !slices.Contains(statuses, rec.Status)) {
			continue
		}
		if len(traceFilter) > 0 && !s.traceMatches(id, traceFilter) {
			continue
		}
		if len(out.Jobs) == limit {
			out.NextCursor = out.Jobs[len(out.Jobs)-1].JobID
			break
		}
		out.Jobs = append(out.Jobs, JobStatus{JobID: id, Status: rec.Status, Attempt: rec.Attempt, Backend: rec.Backend, UpdatedAt: rec.UpdatedAt})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) traceMatches(id string, want map[string]string) bool {
	req, err := s.cfg.Runner.Store().ReadRequest(id)
	if err != nil {
		return false
	}
	for k, v := range want {
		if req.Trace.String(k) != v {
			return false
		}
	}
	return true
}

// cancel stops a job: a queued job is finished as canceled and never
// starts; a running job is killed by its worker. A terminal job is
// returned unchanged.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("job_id")
	st := s.cfg.Runner.Store()
	if res, err := st.ReadResult(id); err == nil {
		writeJSON(w, http.StatusOK, res)
		return
	}
	rec, err := st.ReadStatus(id)
	if err != nil {
		writeError(w, job.Errorf(job.CodeJobNotFound, "job not found").With("job_id", id))
		return
	}
	if rec.Status == job.StatusQueued {
		if req, err := st.ReadRequest(id); err == nil {
			res := s.cfg.Runner.Terminate(req, job.Errorf(job.CodeRunCanceled, "job was canceled before it started"), rec.Attempt)
			_ = s.cfg.Queue.Publish(queue.Event{Type: queue.EventStatus, JobID: id, Status: res.Status})
			s.metrics.finished(res)
		}
	}
	// The cancel message goes out after a queued job's result is written:
	// a worker that took the job registers it before re-checking for a
	// result, so it either sees the result and skips the job, or is
	// registered in time to hear this and kill it.
	_ = s.cfg.Queue.Cancel(id)
	ctx, stop := context.WithTimeout(r.Context(), 5*time.Second)
	defer stop()
	_ = s.cfg.Queue.WaitTerminal(ctx, id, func() bool { _, err := st.ReadResult(id); return err == nil })
	if res, err := st.ReadResult(id); err == nil {
		writeJSON(w, http.StatusOK, res)
		return
	}
	// Still running (a slow kill, or a worker that is not answering).
	writeJSON(w, http.StatusAccepted, JobStatus{JobID: id, Status: rec.Status, UpdatedAt: time.Now().UTC()})
}

func (s *Server) artifacts(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("job_id")
	res, err := s.terminal(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"job_id": id, "artifacts": res.Artifacts})
}

// terminal returns the result of a finished job, job.not_terminal for a
// queued or running one, job.not_found otherwise.
func (s *Server) terminal(id string) (job.Result, error) {
	st := s.cfg.Runner.Store()
	res, err := st.ReadResult(id)
	if err == nil {
		return res, nil
	}
	if _, err := st.ReadStatus(id); err == nil {
		return job.Result{}, job.Errorf(job.CodeNotTerminal, "job has not finished").With("job_id", id)
	}
	return job.Result{}, job.Errorf(job.CodeJobNotFound, "job not found").With("job_id", id)
}

// download serves one recorded artifact. The path is looked up in the
// job's artifact list, never used as a filesystem path directly.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	id, path := r.PathValue("job_id"), r.PathValue("path")
	res, err := s.terminal(id)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, a := range res.Artifacts {
		if a.Path != path {
			continue
		}
		root, err := os.OpenRoot(filepath.Join(s.cfg.Runner.Store().RunDir(id), store.ArtifactsDir))
		if err != nil {
			writeError(w, job.Wrap(job.CodeRunIOFailed, err, "artifact storage is unreadable"))
			return
		}
		defer root.Close()
		f, err := root.Open(filepath.FromSlash(a.Path))
		if err != nil {
			writeError(w, job.Wrap(job.CodeRunIOFailed, err, "artifact file is missing"))
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Content-SHA256", a.SHA256)
		w.Header().Set("Digest", "sha-256="+a.SHA256)
		http.ServeContent(w, r, filepath.Base(a.Path), res.EndedAt, f)
		return
	}
	writeError(w, job.Errorf(job.CodeJobNotFound, "no such artifact").With("job_id", id).With("path", path))
}
