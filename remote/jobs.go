package remote

import (
	"context"
	"log/slog"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/store"
)

// PublishJob returns the worker's hook (worker.Config.Recorded): it
// carries the finished record of a job in st.
func PublishJob(p *Publisher, st *store.Store) func(ctx context.Context, jobID string) error {
	return func(ctx context.Context, jobID string) error {
		res, err := st.ReadResult(jobID)
		if err != nil {
			return err
		}
		return p.Publish(ctx, Jobs, jobID, res.Attempt, st.RunDir(jobID))
	}
}

// JobStore is the API node's job records (a *runner.Runner): its store,
// and Terminate, which ends a job it stored with err and writes its
// result.
type JobStore interface {
	Store() *store.Store
	Terminate(req job.Request, err *job.Error, attempt int) job.Result
}

// MirrorJobs starts, until ctx ends, the API node's side for jobs: the
// Mirror of job records into r's store, and the follower of status
// events that shows a job running on another worker. A record refused for
// good ends its job through r.Terminate.
func MirrorJobs(ctx context.Context, r JobStore, q *queue.Queue, lim Limits, log *slog.Logger) error {
	st := r.Store()
	j := jobSide{st: st, q: q}
	m, err := NewMirror(ctx, q.Conn(), MirrorConfig{
		Kind: Jobs, Dir: st.RunDir, Limits: lim, Durable: st.Durable, Logger: log,
		Committed: j.committed,
		Refused: func(_ context.Context, id string, attempt int, err *job.Error) {
			req, rerr := st.ReadRequest(id)
			if rerr != nil {
				return // a job this node never stored
			}
			res := r.Terminate(req, err, attempt)
			j.publish(id, res.Status, attempt)
		},
	})
	if err != nil {
		return err
	}
	stop, err := q.Watch(ctx, job.EventKind, "", j.status)
	if err != nil {
		return err
	}
	go func() {
		defer stop()
		if err := m.Run(ctx); err != nil {
			log.Error("record mirror stopped", "error", err)
		}
	}()
	return nil
}

// jobSide keeps a job's status.json in step with a record that ran on
// another worker.
type jobSide struct {
	st *store.Store
	q  *queue.Queue
}

// committed writes status.json from the result just mirrored and
// publishes the terminal status again: the worker's came before the
// result could be read here.
func (j jobSide) committed(_ context.Context, m Manifest, _ []byte) {
	res, err := j.st.ReadResult(m.ID)
	if err != nil {
		return
	}
	_ = j.st.WriteStatus(store.StatusRecord{JobID: m.ID, Status: res.Status, Attempt: res.Attempt, Backend: res.Backend, Error: res.Error})
	j.publish(m.ID, res.Status, res.Attempt)
}

func (j jobSide) publish(id string, s job.Status, attempt int) {
	_ = j.q.Publish(job.EventKind, id, job.EventStatus, job.EventPayload{Status: s, Attempt: attempt})
}

// status moves a job without a result forward to running with the
// event's attempt. Terminal events are left to the record (its commit
// writes status.json), and a record already further along (this node's
// own workers, a shared store) is not touched.
func (j jobSide) status(env queue.Envelope) {
	if env.Type != job.EventStatus || !store.ValidJobID(env.ID) {
		return
	}
	p, err := job.DecodeEventPayload(env.Payload)
	if err != nil || p.Status != job.StatusRunning {
		return
	}
	rec, err := j.st.ReadStatus(env.ID)
	if err != nil || rec.Status.Terminal() || (rec.Status == job.StatusRunning && rec.Attempt >= p.Attempt) {
		return
	}
	if _, err := j.st.ReadResult(env.ID); err == nil {
		return
	}
	rec.Status, rec.Attempt, rec.UpdatedAt = job.StatusRunning, p.Attempt, env.Time
	_ = j.st.WriteStatus(rec)
	// A record committed meanwhile wrote its status first: restore it.
	if res, err := j.st.ReadResult(env.ID); err == nil {
		_ = j.st.WriteStatus(store.StatusRecord{JobID: env.ID, Status: res.Status, Attempt: res.Attempt, Backend: res.Backend, Error: res.Error})
	}
}
