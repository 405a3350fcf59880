// Package plane assembles one execution plane in a process: a runner, the
// queue (an embedded NATS JetStream under the run store, no listener), a
// pool of workers and the jobs service in front of them. Doors that run
// on their own (agent-runner mcp over stdio, capability sessions of
// agent-runner launch) open one, so their jobs are queued, run, recorded
// and followed exactly as serve's are; serve builds the same parts itself
// because it also exposes them (HTTP, metrics, remote workers).
package plane

import (
	"context"
	"log/slog"
	"time"

	"github.com/agent-runner/agent-runner/jobs"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/worker"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// Config configures a Plane.
type Config struct {
	// Runner runs the jobs; its store also holds the queue's files. The
	// plane does not close it.
	Runner *runner.Runner
	// Workers is how many jobs run at once (default 2).
	Workers int
	// Capacity is the most jobs queued or running (default 1024).
	Capacity int64
	// Grace is how long Close waits for running jobs (default 10 s); jobs
	// still running then run again when the plane is next opened on the
	// same store.
	Grace time.Duration
	// Roots, when set, hold submitted workspace paths (jobs.Config).
	Roots  *workspaceroot.Roots
	Logger *slog.Logger
}

// Plane is a running queue, worker pool and jobs service.
type Plane struct {
	// Jobs is the service doors call.
	Jobs  *jobs.Service
	queue *queue.Queue
	stop  context.CancelFunc
	done  chan struct{}
}

// Open starts the plane. Close it to stop the workers and the queue.
func Open(ctx context.Context, cfg Config) (*Plane, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	q, err := queue.Open(ctx, queue.Config{StoreDir: cfg.Runner.Store().Dir(), Capacity: cfg.Capacity})
	if err != nil {
		return nil, err
	}
	svc := jobs.New(jobs.Config{Runner: cfg.Runner, Queue: q, Logger: cfg.Logger, WorkspaceRoots: cfg.Roots})
	// Only this process uses this queue: records of submits a crash cut
	// off before they were queued are dropped.
	if _, err := svc.DropUnqueued(ctx); err != nil {
		q.Close()
		return nil, err
	}
	pool := worker.New(worker.Config{Workers: cfg.Workers, Runner: cfg.Runner, Queue: q, Logger: cfg.Logger, Grace: cfg.Grace})
	poolCtx, stop := context.WithCancel(context.Background())
	p := &Plane{Jobs: svc, queue: q, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if err := pool.Run(poolCtx); err != nil {
			cfg.Logger.Error("worker pool stopped", "error", err)
		}
	}()
	return p, nil
}

// Close stops taking jobs, waits up to the grace for running ones, and
// closes the queue.
func (p *Plane) Close() {
	p.stop()
	<-p.done
	p.queue.Close()
}
