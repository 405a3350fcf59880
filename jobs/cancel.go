package jobs

import (
	"context"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/telemetry"
)

// cancelWait bounds how long Cancel waits for a running job to end.
const cancelWait = 5 * time.Second

// Cancel stops a job: a queued job is finished as canceled and never
// starts; a running job is killed by its worker. A terminal job is
// returned unchanged. The view has a result when the job is terminal; a
// running job whose worker has not ended it within a few seconds is
// returned as it stands (the kill goes on).
func (s *Service) Cancel(ctx context.Context, id string) (View, error) {
	st := s.Store()
	if _, err := st.ReadResult(id); err == nil {
		return s.Get(ctx, id, 0)
	}
	rec, err := st.ReadStatus(id)
	if err != nil {
		return View{}, notFound(id)
	}
	// A job recorded running that no process executes (its runner was
	// killed; the queue will deliver it again) is cancelled like a queued
	// one, or the cancel would be lost and the job run again. Only where
	// this store sees every execution (no workers of other hosts).
	orphaned := rec.Status == job.StatusRunning && !s.cfg.Runner.Config().SharedStore && !st.RunLocked(id)
	if rec.Status == job.StatusQueued || orphaned {
		if req, err := st.ReadRequest(id); err == nil {
			res := s.cfg.Runner.Terminate(req, job.Errorf(job.CodeRunCanceled, "job was canceled before it started"), rec.Attempt)
			if err := s.publishStatus(id, res.Status, 0); err != nil {
				s.log.Warn("cannot publish a cancel's status event", telemetry.KeyJobID, id, "error", err)
			}
			s.cfg.Observer.Finished(res)
			// Out of the queue, so a worker whose store cannot see this
			// result (another host's) never runs it.
			if err := s.cfg.Queue.Remove(ctx, id); err != nil {
				s.log.Warn("cannot remove a canceled job's message; its worker will skip it on the cancel", telemetry.KeyJobID, id, "error", err)
			}
		}
	}
	// The cancel message goes out after a queued job's result is written:
	// a worker that took the job registers it before re-checking for a
	// result, so it either sees the result and skips the job, or is
	// registered in time to hear this and kill it.
	if err := s.cfg.Queue.Cancel(id); err != nil {
		return View{}, job.Wrap(job.CodeQueueClosed, err, "cannot send the cancel to the workers")
	}
	wctx, stop := context.WithTimeout(ctx, cancelWait)
	defer stop()
	_ = s.waitTerminal(wctx, id, func() bool { return s.finished(id) })
	return s.Get(ctx, id, 0)
}

// endAbandoned records run.interrupted for a run left "running" by a
// process that died with no queue message to run it again: a task's step
// (runs/<task_id>.agent), or a run of `agent-runner run`. Its record
// would otherwise read as running forever and no retention would take it.
func (s *Service) endAbandoned(id string, rec store.StatusRecord) {
	req, err := s.Store().ReadRequest(id)
	if err != nil {
		s.log.Warn("cannot end a run its process abandoned: no request", telemetry.KeyJobID, id, "error", err)
		return
	}
	s.cfg.Runner.Terminate(req, job.Errorf(job.CodeRunInterrupted, "the process running it stopped before it finished, and nothing runs it again"), rec.Attempt)
	s.log.Warn("ended a run its process abandoned", telemetry.KeyJobID, id)
}

// DropUnqueued removes the records of submits that were cut off between
// writing status.json "queued" and publishing to the queue (the process
// died in between, so the caller never got an answer): a job whose status
// is queued, with no result and no message in the queue. Without this such
// a job would read as queued forever. serve calls it at startup, before it
// accepts requests, and only with its own embedded queue: with a shared
// external one another node may be mid-submit. A run left "running" with
// its lock free and no message in the queue is ended run.interrupted
// (endAbandoned). It returns the ids it removed.
func (s *Service) DropUnqueued(ctx context.Context) ([]string, error) {
	st := s.Store()
	ids, err := st.List()
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, id := range ids {
		if s.finished(id) {
			continue
		}
		rec, err := st.ReadStatus(id)
		if err != nil || (rec.Status != job.StatusQueued && rec.Status != job.StatusRunning) {
			continue
		}
		if rec.Status == job.StatusRunning && st.RunLocked(id) {
			continue // a process of this store is running it now
		}
		queued, err := s.cfg.Queue.Queued(ctx, id)
		if err != nil {
			return dropped, err
		}
		if rec.Status == job.StatusRunning {
			if !queued {
				s.endAbandoned(id, rec)
			}
			continue
		}
		if !queued {
			if err := st.Remove(id); err != nil {
				return dropped, err
			}
			s.log.Warn("dropped a submit that never reached the queue", telemetry.KeyJobID, id)
			dropped = append(dropped, id)
		}
	}
	return dropped, nil
}
