// Package jobs is the transport-neutral jobs service: submit, get, wait,
// cancel, list, follow events, artifacts and recovery of queued work. Every
// door calls it (the HTTP API, MCP over /mcp and stdio, capability
// sessions, the dashboard), and none of them queues, spawns or records on
// its own: a door translates its wire format into these calls and the
// service's errors (stable job codes) into its own (HTTP status, MCP tool
// error, CLI exit code).
//
// The service writes the job's request and its "queued" status (an
// atomic id claim), publishes the job to the queue and reads records back;
// workers (package worker), in this process or on other hosts, run it.
package jobs

import (
	"context"
	"encoding/json"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/telemetry"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// Observer hears what the service decides, for metrics. Every method must
// be goroutine-safe; nil methods are not allowed (use NopObserver).
type Observer interface {
	// Accepted is a job that entered the queue.
	Accepted(backend string)
	// Rejected is a submission refused before queueing.
	Rejected(code job.Code)
	// Finished is a job the service ended itself (canceled while queued).
	Finished(res job.Result)
}

// NopObserver observes nothing.
type NopObserver struct{}

// Accepted implements Observer.
func (NopObserver) Accepted(string) {}

// Rejected implements Observer.
func (NopObserver) Rejected(job.Code) {}

// Finished implements Observer.
func (NopObserver) Finished(job.Result) {}

// Config configures a Service.
type Config struct {
	Runner *runner.Runner
	Queue  *queue.Queue
	Logger *slog.Logger
	Tracer trace.Tracer
	// WorkspaceRoots, when set, is where a submitted workspace.path must
	// lie (validation.path_escape otherwise); nil leaves paths unchecked
	// (library use).
	WorkspaceRoots *workspaceroot.Roots
	Observer       Observer
	// SharedCaches are the workspace.caches names the operator shares
	// across callers (serve --shared-cache); every other cache lives in
	// its caller's namespace (SubmitAs).
	SharedCaches []string
}

// Service is the jobs service. It is safe for concurrent use.
type Service struct {
	cfg   Config
	log   *slog.Logger
	holds holds
}

// New returns a service over cfg's runner (store, validation, policy) and
// queue.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("agent-runner")
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	return &Service{cfg: cfg, log: cfg.Logger.With("component", "jobs")}
}

// Store is the run store the service reads records from.
func (s *Service) Store() *store.Store { return s.cfg.Runner.Store() }

// Queue is the queue jobs go to.
func (s *Service) Queue() *queue.Queue { return s.cfg.Queue }

// Accepted is the answer to a submit.
type Accepted struct {
	JobID  string     `json:"job_id"`
	Status job.Status `json:"status"`
}

// Submit queues req: validate and normalize (a job_<uuid> id when empty),
// record request.json and status.json "queued", publish to the queue. It
// reports whether the job was created; a job_id already used by the same
// request is returned as it stands (false), by a different request it is
// job.conflict. A full queue is queue.full and leaves no record behind.
//
// Submit has no caller to scope build caches to: a request with
// workspace.caches is refused (validation.invalid_request); doors that
// know their caller use SubmitAs.
func (s *Service) Submit(ctx context.Context, req *job.Request) (Accepted, bool, error) {
	return s.submit(ctx, "", req)
}

// SubmitAs is Submit on behalf of a caller: cacheNamespace is the
// namespace its workspace.caches live in (buildcache.TokenNamespace of
// the bearer token's name, buildcache.LocalNamespace for this host's own
// user), so two callers naming one cache get two directories. Empty
// refuses caches, as Submit does.
func (s *Service) SubmitAs(ctx context.Context, cacheNamespace string, req *job.Request) (Accepted, bool, error) {
	return s.submit(ctx, cacheNamespace, req)
}

func (s *Service) submit(ctx context.Context, cacheNS string, req *job.Request) (Accepted, bool, error) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = telemetry.JobContext(ctx, *req)
	}
	ctx, span := s.cfg.Tracer.Start(ctx, "job.submit")
	defer span.End()
	if err := s.admit(req); err != nil {
		s.cfg.Observer.Rejected(job.CodeOf(err))
		return Accepted{}, false, err
	}
	if err := cacheCaller(req, cacheNS); err != nil {
		s.cfg.Observer.Rejected(job.CodeOf(err))
		return Accepted{}, false, err
	}
	if err := s.cfg.Runner.Prepare(req); err != nil {
		s.cfg.Observer.Rejected(job.CodeOf(err))
		return Accepted{}, false, err
	}
	span.SetAttributes(attribute.String(telemetry.KeyJobID, req.JobID))
	st := s.Store()
	// The claim is atomic: of concurrent submits of one id one creates the
	// record; the others find the complete request and compare it.
	created, err := st.Claim(*req, store.StatusRecord{JobID: req.JobID, Status: job.StatusQueued, Backend: req.Backend.Kind})
	if job.CodeOf(err) == job.CodeJobConflict {
		return Accepted{}, false, err
	}
	if err != nil {
		s.cfg.Observer.Rejected(job.CodeOf(err))
		return Accepted{}, false, err // nothing was created
	}
	if !created {
		return s.resubmit(*req), false, nil
	}
	// The queued event goes out before the job can reach a worker, so it
	// always precedes "running" in the event stream.
	_ = s.publishStatus(req.JobID, job.StatusQueued, 0)
	payload, err := json.Marshal(queue.Message{Request: *req, CacheNamespace: cacheNS, SharedCaches: s.sharedCaches(req)})
	if err == nil {
		err = s.cfg.Queue.Enqueue(ctx, req.JobID, payload)
	}
	if err != nil {
		if rmErr := st.Remove(req.JobID); rmErr != nil { // nothing half-accepted stays behind
			s.log.Error("cannot remove the record of a refused submit", telemetry.KeyJobID, req.JobID, "error", rmErr)
		}
		s.cfg.Observer.Rejected(job.CodeOf(err))
		return Accepted{}, false, err
	}
	s.cfg.Observer.Accepted(req.Backend.Kind)
	s.log.Info("job accepted", telemetry.KeyJobID, req.JobID, telemetry.KeyTraceID, req.Trace.String(job.TraceID), "backend", req.Backend.Kind)
	return Accepted{JobID: req.JobID, Status: job.StatusQueued}, true, nil
}

// admit holds a submitted workspace.path to the operator's workspace
// roots, before anything else looks at it (so whether a file exists
// outside them is not disclosed), and replaces the path with the resolved
// one it checked. Workers check the same again (a message may come from
// elsewhere).
func (s *Service) admit(req *job.Request) error {
	if s.cfg.WorkspaceRoots == nil {
		return s.held(req.Workspace.Path)
	}
	if req.Workspace.Path != "" {
		real, err := s.cfg.WorkspaceRoots.Check(req.Workspace.Path)
		if err != nil {
			return job.AsError(err).With("field", "workspace.path")
		}
		req.Workspace.Path = real
		return s.held(real)
	}
	return nil
}

// resubmit answers a submit of the request already stored under its
// job_id (store.Claim compared them): the job as it stands.
func (s *Service) resubmit(req job.Request) Accepted {
	status := job.StatusQueued
	if rec, err := s.Store().ReadStatus(req.JobID); err == nil {
		status = rec.Status
	}
	return Accepted{JobID: req.JobID, Status: status}
}
