package jobs

import (
	"context"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

// publishStatus sends a job's status event on the bus.
func (s *Service) publishStatus(id string, st job.Status, attempt int) error {
	return s.cfg.Queue.Publish(job.EventKind, id, job.EventStatus, job.EventPayload{Status: st, Attempt: attempt})
}

// waitTerminal returns when a terminal status event of job id is
// published, ctx ends, or done reports true (checked once the watch is in
// place, so a result written just before is not missed).
func (s *Service) waitTerminal(ctx context.Context, id string, done func() bool) error {
	terminal := make(chan struct{}, 1)
	stop, err := s.cfg.Queue.Watch(ctx, job.EventKind, id, func(env queue.Envelope) {
		if env.Type != job.EventStatus {
			return
		}
		if p, err := job.DecodeEventPayload(env.Payload); err == nil && p.Status.Terminal() {
			select {
			case terminal <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot follow job events")
	}
	defer stop()
	if done() {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-terminal:
		return nil
	}
}
