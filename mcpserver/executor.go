package mcpserver

import (
	"context"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// Executor is how the MCP tools run jobs.
type Executor interface {
	// Start validates and starts (or queues) a job and returns its id.
	Start(ctx context.Context, req job.Request) (string, error)
	// Wait returns the job's result once terminal.
	Wait(ctx context.Context, id string) (job.Result, error)
	// Status returns the status and, once terminal, the result.
	Status(ctx context.Context, id string) (job.Status, *job.Result, error)
	// Cancel stops a job.
	Cancel(ctx context.Context, id string) error
}

// Local runs jobs in this process through the runner (agent-runner mcp
// over stdio).
type Local struct {
	Runner *runner.Runner
	mu     sync.Mutex
	jobs   map[string]*localJob
}

type localJob struct {
	cancel context.CancelFunc
	done   chan struct{}
	res    job.Result
}

var _ Executor = (*Local)(nil)

// Start implements Executor.
func (l *Local) Start(_ context.Context, req job.Request) (string, error) {
	if err := l.Runner.Prepare(&req); err != nil {
		return "", err
	}
	ctx, cancel := context.WithCancel(context.Background())
	j := &localJob{cancel: cancel, done: make(chan struct{})}
	l.mu.Lock()
	if l.jobs == nil {
		l.jobs = map[string]*localJob{}
	}
	l.jobs[req.JobID] = j
	l.mu.Unlock()
	go func() {
		defer cancel()
		j.res = l.Runner.Execute(ctx, req, runner.Options{Attempt: 1})
		close(j.done)
	}()
	return req.JobID, nil
}

// Wait implements Executor.
func (l *Local) Wait(ctx context.Context, id string) (job.Result, error) {
	l.mu.Lock()
	j := l.jobs[id]
	l.mu.Unlock()
	if j == nil {
		return l.Runner.Store().ReadResult(id)
	}
	select {
	case <-j.done:
		return j.res, nil
	case <-ctx.Done():
		return job.Result{}, job.Wrap(job.CodeRunCanceled, ctx.Err(), "stopped waiting for the job")
	}
}

// Status implements Executor.
func (l *Local) Status(_ context.Context, id string) (job.Status, *job.Result, error) {
	st := l.Runner.Store()
	if res, err := st.ReadResult(id); err == nil {
		return res.Status, &res, nil
	}
	rec, err := st.ReadStatus(id)
	if err != nil {
		l.mu.Lock()
		_, started := l.jobs[id]
		l.mu.Unlock()
		if started {
			return job.StatusQueued, nil, nil // started here, not yet recorded
		}
		return "", nil, job.Errorf(job.CodeJobNotFound, "job not found").With("job_id", id)
	}
	return rec.Status, nil, nil
}

// Cancel implements Executor.
func (l *Local) Cancel(ctx context.Context, id string) error {
	l.mu.Lock()
	j := l.jobs[id]
	l.mu.Unlock()
	if j == nil {
		if _, _, err := l.Status(ctx, id); err != nil {
			return err
		}
		return nil // finished before this process knew it
	}
	j.cancel()
	select {
	case <-j.done:
	case <-time.After(10 * time.Second):
	}
	return nil
}
