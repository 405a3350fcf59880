package taskstore

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/state"
)

// Queue is the bounded queue tasks take their place in, beside jobs
// (package queue). With it, a submitted task is recorded pending and
// published; a worker (serve's own, or agent-runner worker elsewhere)
// takes it and calls RunQueued. Without it (library use) the store runs
// tasks itself.
type Queue interface {
	EnqueueTask(ctx context.Context, taskID string, payload []byte) error
	QueuedTask(ctx context.Context, taskID string) (bool, error)
	RemoveTask(ctx context.Context, taskID string) error
	CancelTask(taskID string) error
}

// enqueueWait bounds one publish to the queue.
const enqueueWait = 10 * time.Second

// dispatch hands a pending task to the queue, or starts it here when the
// store has none. Its message is the stored manifest, so a worker with a
// store of its own can record the task from it.
func (s *Store) dispatch(t *manifest.Task, doc []byte) error {
	if s.Queue == nil {
		s.start(t, doc)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), enqueueWait)
	defer cancel()
	return s.Queue.EnqueueTask(ctx, t.Metadata.ID, doc)
}

// RunQueued implements worker.TaskRunner: it runs the task of one queue
// delivery to a terminal state in this store.
//   - A task this store has no record of (a worker with a store of its
//     own) is recorded from the message first. Delivered before (attempt
//     over 1), it went to a worker that stopped, maybe mid-run, and whose
//     record this store cannot read: it ends failed, run.interrupted,
//     rather than run a second time.
//   - A terminal task (cancelled while queued, or finished before an
//     acknowledgement was lost) is left as it is.
//   - A task that had started (its worker died or shut down) cannot
//     resume from the middle: it ends failed, run.interrupted, naming the
//     stage it was in.
func (s *Store) RunQueued(ctx context.Context, id string, payload []byte, attempt int) error {
	t, err := manifest.Parse(payload)
	if err != nil || t.Metadata.ID != id {
		// Nothing can run from it; a record of it, if any, says why.
		if m, oerr := s.Open(id); oerr == nil && !m.Current().State.Terminal() {
			s.transition(m, state.Failed, "the queued task message is unreadable", job.Errorf(job.CodeRunIOFailed, "the queued task message is unreadable"))
		}
		return nil
	}
	m, err := s.Open(id)
	fresh := false
	if err != nil {
		if _, statErr := os.Stat(s.Dir(id)); statErr == nil {
			return err // a record exists but cannot be read: leave the message
		}
		// A redelivery racing this one may have recorded it first: the
		// same manifest is no error.
		if _, err := s.create(t, payload); err != nil {
			return err
		}
		if m, err = s.Open(id); err != nil {
			return err
		}
		fresh = true
	}
	switch cur := m.Current().State; {
	case cur.Terminal():
		return nil
	case fresh && attempt > 1:
		s.transition(m, state.Failed, fmt.Sprintf("delivered again (attempt %d) after the worker that took it stopped; a task does not resume from the middle", attempt),
			job.Errorf(job.CodeRunInterrupted, "the worker that took the task stopped before finishing it").With("attempt", attempt-1))
		s.finished(t)
		return nil
	case cur != state.Pending:
		s.transition(m, state.Failed, "interrupted during "+string(cur)+"; a task does not resume from the middle",
			job.Errorf(job.CodeRunInterrupted, "the worker running the task stopped while it was %s", cur).With("stage", string(cur)).With("attempt", attempt-1))
		s.finished(t)
		return nil
	}
	s.run(ctx, t, payload)
	return nil
}

// transition moves m to a state and tells the observer.
func (s *Store) transition(m *state.Machine, to state.State, reason string, jerr *job.Error) {
	from := m.Current().State
	if err := m.Transition(to, reason, jerr); err == nil {
		s.observe(from, m.Current())
	}
}

// requeue puts back in the queue, after a restart, the pending tasks
// whose message a crash lost between record and publish. Children wait
// again for a max_concurrent slot.
func (s *Store) requeue(id string, t *manifest.Task, doc []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), enqueueWait)
	defer cancel()
	queued, err := s.Queue.QueuedTask(ctx, id)
	if err != nil {
		return err
	}
	if queued {
		s.mu.Lock()
		s.dispatched[id] = true // still holds its slot
		s.mu.Unlock()
		return nil
	}
	if t.ParentID != "" {
		parent, _ := s.manifest(t.ParentID)
		return s.schedule(t, doc, parent)
	}
	return s.dispatch(t, doc)
}

// removeRecord deletes the record of a task the queue refused (a full
// queue): nothing half-accepted stays behind. A child's id stays in its
// parent's children list; Children skips ids without a record.
func (s *Store) removeRecord(id string) {
	if err := s.records.Remove(id); err != nil {
		s.log().Warn("cannot remove the record of a task the queue refused", "task_id", id, "error", err)
	}
}
