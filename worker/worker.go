// Package worker runs queued jobs: a pool of goroutines pulls job messages
// from the queue, runs each through the pipeline with live status and
// output events, keeps the message alive while the job runs, and
// acknowledges it only after the result is recorded. It also hears cancel
// requests for the jobs it is running, and decides what a redelivered job
// (one that was running when a worker died) does: run again, or finish as
// interrupted when its request opted out of retries.
//
// Shutdown keeps the promise that a job still running when the grace
// ends runs again after a restart: it is killed, its record is put back to
// running (never left canceled), and its message is not acknowledged, so
// the queue delivers it again.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/telemetry"
)

// errShutdown is the cause a job's context ends with when shutdown stops
// it: the job is left to run again, not recorded as canceled.
// For an agent task, which cannot run again from the middle, it is the
// recorded reason: the task ends failed with run.interrupted.
var errShutdown = job.Errorf(job.CodeRunInterrupted, "the worker shut down while it ran")

// killWait bounds how long Run waits for killed jobs to return.
const killWait = 15 * time.Second

// Config configures a Pool.
type Config struct {
	Workers int
	Runner  *runner.Runner
	Queue   *queue.Queue
	Logger  *slog.Logger
	// Grace bounds how long Run waits for running jobs after its context
	// ends; jobs still running then are killed, their records put back to
	// running and their messages left unacknowledged: they run again
	// after a restart (or on another worker).
	Grace time.Duration
	// Abort, when closed during the grace, ends it at once (a second
	// signal).
	Abort <-chan struct{}
	// Draining, when set, is told what the grace waits for when Run's
	// context ends with jobs running (default: an info log line).
	Draining func(grace time.Duration, jobIDs []string)
	// Result and Stage, when set, observe every finished job and stage
	// (metrics, traces).
	Result func(job.Result)
	Stage  func(jobID, stage string, d time.Duration)
	// Started observes a job picked up by a worker, with its attempt.
	Started func(req job.Request, attempt int)
	// Tracer records a job.run span per job and a span per stage, joined
	// to the job's trace.trace_id (nil: no spans).
	Tracer trace.Tracer
	// Admit, when set, checks a pulled job before it runs: its request
	// and the host directories its message mounts (the worker's own
	// --workspace-root); a job it refuses ends with that error.
	Admit func(queue.Message) error
	// Recorded, when set, is called once a job's result is recorded and
	// before its message is acknowledged (remote.PublishJob carries the
	// record to an API node with its own store). An error leaves the
	// message unacknowledged: the job is delivered again, and a worker
	// that finds the result recorded calls Recorded again.
	Recorded func(ctx context.Context, jobID string) error
	// Tasks, when set, runs the agent tasks the queue delivers, on
	// TaskWorkers slots of their own (default 4): tasks run for minutes
	// and never hold up jobs. Without it this pool takes no tasks.
	Tasks       TaskRunner
	TaskWorkers int
	// TaskRecorded, when set, is called once a task delivery ended with
	// the task terminal in Tasks' store and before its message is
	// acknowledged (remote.PublishTask carries the task's record to an
	// API node with its own store). An error leaves the message
	// unacknowledged, like Recorded.
	TaskRecorded func(ctx context.Context, taskID string) error
}

// Pool is a set of workers.
type Pool struct {
	cfg     Config
	log     *slog.Logger
	mu      sync.Mutex
	running map[string]context.CancelFunc
}

// New returns a pool; call Run to start it.
func New(cfg Config) *Pool {
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	if cfg.TaskWorkers <= 0 {
		cfg.TaskWorkers = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("agent-runner")
	}
	return &Pool{cfg: cfg, log: cfg.Logger.With("component", "worker"), running: map[string]context.CancelFunc{}}
}

// Run pulls and runs jobs until ctx ends, then waits up to Grace for
// running jobs.
func (p *Pool) Run(ctx context.Context) error {
	stop, err := p.cfg.Queue.OnCancel(p.cancel)
	if err != nil {
		return err
	}
	defer stop()
	// Jobs run on their own context so that shutting down the pool stops
	// fetching without killing work in progress; when it ends, with
	// errShutdown, the jobs are left to run again.
	jobsCtx, killJobs := context.WithCancelCause(context.Background())
	defer killJobs(errShutdown)
	var wg sync.WaitGroup
	for i := 0; i < p.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.pull(ctx, jobsCtx, "job", p.cfg.Queue.Next, p.handle)
		}()
	}
	if p.cfg.Tasks != nil {
		for i := 0; i < p.cfg.TaskWorkers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.pull(ctx, jobsCtx, "task", p.cfg.Queue.NextTask, p.handleTask)
			}()
		}
	}
	<-ctx.Done()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if ids := p.Running(); len(ids) > 0 {
		p.draining(ids)
	}
	select {
	case <-done:
		return nil
	case <-time.After(p.cfg.Grace):
		p.log.Warn("shutdown grace expired; stopping running jobs, they run again after restart", "jobs", p.Running())
	case <-p.cfg.Abort:
		p.log.Warn("stopping running jobs now; they run again after restart", "jobs", p.Running())
	}
	killJobs(errShutdown)
	select {
	case <-done:
	case <-time.After(killWait):
		p.log.Error("killed jobs did not return; exiting without them", "jobs", p.Running())
	}
	return nil
}

// Running returns the ids of the jobs this pool is running, sorted.
func (p *Pool) Running() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.running))
	for id := range p.running {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (p *Pool) draining(ids []string) {
	if p.cfg.Draining != nil {
		p.cfg.Draining(p.cfg.Grace, ids)
		return
	}
	p.log.Info("waiting for running jobs", "grace", p.cfg.Grace.String(), "jobs", ids)
}

// Cancel cancels a job this pool is running; it reports whether it was.
func (p *Pool) cancel(jobID string) {
	p.mu.Lock()
	c := p.running[jobID]
	p.mu.Unlock()
	if c != nil {
		c()
	}
}

// pull takes deliveries from next and hands each to handle (on jobsCtx)
// until ctx ends.
func (p *Pool) pull(ctx, jobsCtx context.Context, what string, next func(context.Context, time.Duration) (queue.Delivery, error), handle func(context.Context, queue.Delivery)) {
	for ctx.Err() == nil {
		d, err := next(ctx, 2*time.Second)
		if errors.Is(err, queue.ErrNoJob) || ctx.Err() != nil {
			continue
		}
		if err != nil {
			p.log.Error(what+" fetch failed", "error", err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		handle(jobsCtx, d)
	}
}

func (p *Pool) handle(ctx context.Context, d queue.Delivery) {
	log := p.log.With(telemetry.KeyJobID, d.JobID)
	msg, err := queue.DecodeMessage(d.Payload)
	if err == nil && msg.Request.JobID != d.JobID {
		err = job.Errorf(job.CodeInvalidRequest, "the message's job_id %q is not its subject's", msg.Request.JobID)
	}
	if err != nil {
		log.Error("dropping an undecodable job message", "error", err)
		if err := d.Done(ctx); err != nil {
			log.Warn("cannot acknowledge an undecodable job message", "error", err)
		}
		return
	}
	req := msg.Request
	log = log.With(telemetry.KeyTraceID, req.Trace.String(job.TraceID))
	st := p.cfg.Runner.Store()
	if _, err := st.ReadResult(req.JobID); err == nil {
		if p.recorded(ctx, d) {
			_ = d.Done(ctx) // already finished or canceled while queued
		}
		return
	}
	// A job whose record says running was interrupted: its worker died.
	// The store is consulted as well as the delivery count, because a
	// NATS server killed outright may not have persisted the count.
	if rec, err := st.ReadStatus(req.JobID); err == nil && rec.Status == job.StatusRunning && d.Attempt <= rec.Attempt {
		d.Attempt = rec.Attempt + 1
	}
	var res job.Result
	log = log.With("attempt", d.Attempt)
	if d.Attempt > 1 && req.OnInterrupt == "fail" {
		p.started(req, d.Attempt)
		log.Warn("job was interrupted and opted out of retries")
		res = p.cfg.Runner.Terminate(req, job.Errorf(job.CodeRunInterrupted, "the runner stopped while the job was running").With("attempt", d.Attempt-1), d.Attempt)
		p.publishStatus(req.JobID, res.Status, d.Attempt)
	} else if err := p.admit(msg); err != nil {
		p.started(req, d.Attempt)
		log.Warn("job refused by this worker", "error", err)
		res = p.cfg.Runner.Terminate(req, job.AsError(err), d.Attempt)
		p.publishStatus(req.JobID, res.Status, d.Attempt)
	} else {
		var end outcome
		switch res, end = p.execute(ctx, msg, d); end {
		case finishedBefore:
			if p.recorded(ctx, d) {
				_ = d.Done(context.Background()) // canceled while it was being taken
			}
			return
		case stopped:
			// Not acknowledged: the queue delivers it again.
			log.Warn("job stopped by shutdown; it runs again after restart")
			return
		}
	}
	if !p.recorded(ctx, d) {
		return
	}
	if err := d.Done(context.Background()); err != nil {
		log.Error("ack failed; the job may run again", "error", err)
	}
	log.Info("job finished", "status", res.Status, "duration_ms", res.DurationMS)
	if p.cfg.Result != nil {
		p.cfg.Result(res)
	}
}

// outcome is how execute ended.
type outcome int

const (
	ran            outcome = iota // the job ran and its result is recorded
	finishedBefore                // canceled while queued: nothing ran
	stopped                       // shutdown stopped it: to run again
)

// execute runs the job. It reports finishedBefore when the job turned out
// to be finished (canceled while queued) once this worker was registered
// to hear cancels, and stopped when shutdown killed it (or came before it
// started): its record then says running again, for the next attempt.
func (p *Pool) execute(ctx context.Context, msg queue.Message, d queue.Delivery) (res job.Result, end outcome) {
	req := msg.Request
	jobCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.mu.Lock()
	p.running[req.JobID] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.running, req.JobID)
		p.mu.Unlock()
	}()
	// The API writes a queued job's canceled result before it sends the
	// cancel message, so this check and the registration above leave no
	// window in which a canceled job starts.
	if _, err := p.cfg.Runner.Store().ReadResult(req.JobID); err == nil {
		return job.Result{}, finishedBefore
	}
	if ctx.Err() != nil {
		return job.Result{}, stopped // taken as shutdown began: never started
	}
	p.started(req, d.Attempt)
	// Keep the message alive while the job runs.
	defer d.KeepAliveEvery(time.Second)()
	q := p.cfg.Queue
	spanCtx, span := p.cfg.Tracer.Start(telemetry.JobContext(jobCtx, req), "job.run")
	span.SetAttributes(attribute.String(telemetry.KeyJobID, req.JobID), attribute.Int("attempt", d.Attempt))
	defer span.End()
	stage := func(id, name string, dur time.Duration) {
		telemetry.StageSpan(spanCtx, p.cfg.Tracer, id, name, dur)
		if p.cfg.Stage != nil {
			p.cfg.Stage(id, name, dur)
		}
	}
	shutdown := func() bool { return errors.Is(context.Cause(ctx), errShutdown) }
	res = p.cfg.Runner.Execute(jobCtx, req, runner.Options{
		Attempt: d.Attempt,
		Status: func(id string, s job.Status) {
			if s.Terminal() && shutdown() {
				return // not final: the job runs again
			}
			p.publishStatus(id, s, d.Attempt)
		},
		Output: func(id, stream string, b []byte) {
			_ = q.Publish(job.EventKind, id, stream, job.EventPayload{Data: b}) // encoded before it returns
		},
		Egress: func(id string, d egress.Decision) {
			b, _ := json.Marshal(d)
			_ = q.Publish(job.EventKind, id, job.EventEgress, job.EventPayload{Egress: b})
		},
		Stage:       stage,
		Interrupted: shutdown,
		// The caller's build caches, as the accepting door scoped them.
		CacheNamespace: msg.CacheNamespace,
		SharedCaches:   msg.SharedCaches,
	})
	// A job that finished on its own as shutdown came keeps its result;
	// any other ending then was the kill.
	if shutdown() && res.Status != job.StatusCompleted {
		if err := p.reopen(req, d.Attempt); err != nil {
			p.log.Error("cannot put a stopped job's record back to running", telemetry.KeyJobID, req.JobID, "error", err)
		}
		return res, stopped
	}
	return res, ran
}

// reopen leaves the record of an attempt that shutdown killed as the
// next delivery expects it: the runner recorded nothing terminal
// (Options.Interrupted), and status.json says running, so the
// redelivery is taken as the next attempt.
func (p *Pool) reopen(req job.Request, attempt int) error {
	return p.cfg.Runner.Store().WriteStatus(store.StatusRecord{JobID: req.JobID, Status: job.StatusRunning, Attempt: attempt, Backend: req.Backend.Kind})
}

// recorded hands a job whose result is recorded to cfg.Recorded (see
// handOver).
func (p *Pool) recorded(ctx context.Context, d queue.Delivery) bool {
	return p.handOver(ctx, d, p.cfg.Recorded, p.log.With(telemetry.KeyJobID, d.JobID))
}

// handOver calls hook (cfg.Recorded, cfg.TaskRecorded) for a delivery
// whose record is written, keeping its message alive meanwhile (a large
// record takes a while). False means it failed: the message is left
// unacknowledged, to be delivered again.
func (p *Pool) handOver(ctx context.Context, d queue.Delivery, hook func(context.Context, string) error, log *slog.Logger) bool {
	if hook == nil {
		return true
	}
	defer d.KeepAliveEvery(time.Second)()
	if err := hook(ctx, d.JobID); err != nil {
		log.Error("cannot hand over the record; it is delivered again", "error", err)
		return false
	}
	return true
}

func (p *Pool) admit(msg queue.Message) error {
	if p.cfg.Admit == nil {
		return nil
	}
	return p.cfg.Admit(msg)
}

func (p *Pool) started(req job.Request, attempt int) {
	if p.cfg.Started != nil {
		p.cfg.Started(req, attempt)
	}
}

func (p *Pool) publishStatus(id string, s job.Status, attempt int) {
	_ = p.cfg.Queue.Publish(job.EventKind, id, job.EventStatus, job.EventPayload{Status: s, Attempt: attempt})
}
