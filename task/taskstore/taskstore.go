// Package taskstore keeps the task directories of one runner
// (<store>/tasks/<task_id>/): submitting a manifest, running it in the
// background, cancelling it, recovering after a restart (no task is left in
// an active state: a pending task starts again, any other active state is
// ended as failed with the interrupted stage recorded), and retention
// (terminal tasks removed after configurable ages). Its directory is the
// store's task records (store.Tasks): ids follow the store's one rule, a
// submit claims its id atomically, and retention is the store's.
package taskstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/state"
)

// Retention ages (the peer's defaults: 7 days completed, 14 failed, 3
// cancelled).
type Retention struct {
	Completed time.Duration
	Failed    time.Duration
	Cancelled time.Duration
}

// DefaultRetention is seed 004's peer policy.
var DefaultRetention = Retention{Completed: 7 * 24 * time.Hour, Failed: 14 * 24 * time.Hour, Cancelled: 3 * 24 * time.Hour}

// Store is a directory of tasks.
type Store struct {
	Root      string
	Lifecycle lifecycle.Config
	Retention Retention
	// Queue, when set, is where submitted tasks wait for a worker (see
	// RunQueued); nil runs them in this process.
	Queue Queue
	// SharedQueue says workers of other processes take tasks from Queue
	// too: Recover then leaves a started task to its worker, or to the
	// queue's redelivery. Otherwise only this process ran it, and a task
	// found started at start-up was interrupted by the restart.
	SharedQueue bool

	records *store.Records

	mu      sync.Mutex
	running map[string]context.CancelFunc
	// dispatched marks the children handed to the queue or started (they
	// hold a max_concurrent slot until they are terminal); waiting holds
	// children over their parent's max_concurrent, in submission order.
	dispatched map[string]bool
	waiting    map[string][]queued
	wg         sync.WaitGroup
}

// New returns a store rooted at root (created if needed).
func New(root string, cfg lifecycle.Config) (*Store, error) {
	records, err := store.OpenRecords(root, store.Tasks)
	if err != nil {
		return nil, err
	}
	s := &Store{Root: root, Lifecycle: cfg, Retention: DefaultRetention, records: records, running: map[string]context.CancelFunc{},
		dispatched: map[string]bool{}, waiting: map[string][]queued{}}
	s.Lifecycle.ChildrenOf = s.Children
	return s, nil
}

// Dir is a task's directory.
func (s *Store) Dir(id string) string { return filepath.Join(s.Root, id) }

// Submit parses a manifest, checks it against the operator's rules
// (lifecycle.Admit: workspace roots, secrets file), records the task as
// pending and starts it.
func (s *Store) Submit(manifestYAML []byte) (string, error) {
	t, err := manifest.Parse(manifestYAML)
	if err != nil {
		return "", err
	}
	if t.ParentID != "" {
		// A manifest naming its parent is a child whoever submits it:
		// the parent must exist, and the child meets its parent's bounds.
		if !ValidID(t.ParentID) {
			return "", job.Errorf(job.CodeInvalidRequest, "parent_id %q is not a valid task id", t.ParentID).With("field", "parent_id")
		}
		if _, err := os.Stat(s.Dir(t.ParentID)); err != nil {
			return "", job.Errorf(job.CodeJobNotFound, "parent task %s does not exist", t.ParentID).With("parent_id", t.ParentID)
		}
		return s.SubmitChild(t.ParentID, manifestYAML)
	}
	if err := lifecycle.Admit(s.Lifecycle, t); err != nil {
		return "", err
	}
	if !manifest.HasID(manifestYAML) {
		// The id was minted here: the stored manifest and the queue
		// message carry it, so a worker or a restart reading the document
		// again finds this task, not a new id.
		if manifestYAML, err = yaml.Marshal(t); err != nil {
			return "", job.Wrap(job.CodeInternal, err, "cannot store the manifest")
		}
	}
	if err := s.createNew(t, manifestYAML); err != nil {
		return "", err
	}
	if err := s.dispatch(t, manifestYAML); err != nil {
		s.removeRecord(t.Metadata.ID)
		return "", err
	}
	return t.Metadata.ID, nil
}

// create records a new task as pending with its manifest and reports
// whether this call created it. The id is claimed atomically
// (store.Records.Claim): of concurrent submits of one id, in any number
// of processes sharing the store, exactly one creates the task; a repeat
// with the same manifest is (false, nil), one with another manifest is
// job.conflict.
func (s *Store) create(t *manifest.Task, manifestYAML []byte) (bool, error) {
	id := t.Metadata.ID
	created, err := s.records.Claim(id, manifestDigest(t, manifestYAML), func(dir string) error {
		if _, err := state.Create(dir, id, t.ParentID); err != nil {
			return err
		}
		// The manifest is in the record before it exists, so a pending
		// task can be restarted after a crash.
		return store.WriteFileReplace(filepath.Join(dir, "manifest.yaml"), manifestYAML, store.RecordFileMode)
	})
	if err != nil || !created {
		return false, err
	}
	m, err := state.Open(s.Dir(id))
	if err != nil {
		return true, err
	}
	if t.ParentID != "" && ValidID(t.ParentID) {
		if _, err := os.Stat(s.Dir(t.ParentID)); err == nil {
			if err := s.indexChild(t.ParentID, id); err != nil {
				return true, err
			}
		}
	}
	// Observed once complete: a reader that follows the state events
	// (GET /v1/events) finds the task's name and labels.
	s.observe("", m.Current())
	return true, nil
}

// createNew is create for a submit: a task id already taken is
// job.conflict (409), whether the manifest is the same (details
// same_manifest: true; the repeat changed nothing, and answers so rather
// than run an agent's work twice) or another.
func (s *Store) createNew(t *manifest.Task, manifestYAML []byte) error {
	created, err := s.create(t, manifestYAML)
	if err != nil {
		if je := job.AsError(err); je.Code == job.CodeJobConflict {
			return je.With("same_manifest", false)
		}
		return err
	}
	if !created {
		return job.Errorf(job.CodeJobConflict, "task %s already exists, submitted with this same manifest; nothing was changed", t.Metadata.ID).
			With("task_id", t.Metadata.ID).With("same_manifest", true)
	}
	return nil
}

// manifestDigest is the digest a task id is claimed with: of the parsed
// manifest in its stored form, so one manifest sent as YAML or as JSON
// is the same request; of the document itself if it cannot be encoded.
func manifestDigest(t *manifest.Task, doc []byte) string {
	if b, err := yaml.Marshal(t); err == nil {
		doc = b
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:])
}

// start runs a task in this process, in the background (no queue).
func (s *Store) start(t *manifest.Task, manifestYAML []byte) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.run(context.Background(), t, manifestYAML)
	}()
}

// run runs a pending task to its end, cancellable through Cancel, then
// lets its parent's next waiting child go.
func (s *Store) run(ctx context.Context, t *manifest.Task, manifestYAML []byte) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.running[t.Metadata.ID] = cancel
	s.mu.Unlock()
	_, _ = lifecycle.Run(ctx, s.Dir(t.Metadata.ID), t, manifestYAML, s.Lifecycle)
	s.mu.Lock()
	delete(s.running, t.Metadata.ID)
	s.mu.Unlock()
	s.finished(t)
}

// finished lets the next waiting child of t's parent go.
func (s *Store) finished(t *manifest.Task) {
	if t.ParentID != "" {
		s.release(t.ParentID)
	}
}

// Cancel stops a running task (TERM, grace, KILL through its backend); the
// task ends as cancelled with whatever was collected. Its active children,
// running or waiting, are cancelled with it.
func (s *Store) Cancel(id string) error {
	s.mu.Lock()
	cancel := s.running[id]
	waiting := s.waiting[id]
	delete(s.waiting, id)
	s.mu.Unlock()
	for _, q := range waiting {
		s.cancelChild(id, q.t.Metadata.ID)
	}
	for _, c := range s.Children(id) {
		if !c.State.Terminal() {
			s.cancelChild(id, c.TaskID)
		}
	}
	if cancel != nil {
		cancel()
		return nil
	}
	m, err := s.Open(id)
	if err != nil {
		return err
	}
	cur := m.Current().State
	if cur.Terminal() {
		return nil
	}
	if s.Queue != nil {
		if cur != state.Pending {
			// Running on a worker of another process: it hears this and
			// records the cancellation itself.
			if err := s.Queue.CancelTask(id); err != nil {
				return job.Wrap(job.CodeQueueClosed, err, "cannot send the cancel to the workers")
			}
			return nil
		}
		ctx, stop := context.WithTimeout(context.Background(), enqueueWait)
		defer stop()
		// Out of the queue first, so no worker takes it; one that already
		// did finds it cancelled, or hears the cancel.
		if err := s.Queue.RemoveTask(ctx, id); err != nil {
			s.log().Warn("cannot remove a cancelled task's message; a worker that takes it finds it cancelled", "task_id", id, "error", err)
		}
		defer func() {
			if err := s.Queue.CancelTask(id); err != nil {
				s.log().Warn("cannot send a task's cancel to the workers", "task_id", id, "error", err)
			}
		}()
	}
	if err := m.Transition(state.Cancelled, "cancelled while not running in this process", job.Errorf(job.CodeRunCanceled, "task was cancelled")); err != nil {
		return err
	}
	s.observe(cur, m.Current())
	return nil
}

// recoverTo ends a task Recover found it could not restart.
func (s *Store) recoverTo(id string, m *state.Machine, reason string, jerr *job.Error) {
	if err := m.Transition(state.Failed, reason, jerr); err != nil {
		s.log().Error("recovery cannot end a task", "task_id", id, "error", err)
	}
}

// cancelChild cancels a child of a task being cancelled.
func (s *Store) cancelChild(parentID, id string) {
	if err := s.Cancel(id); err != nil {
		s.log().Warn("cannot cancel the child of a cancelled task", "task_id", id, "parent_id", parentID, "error", err)
	}
}

// log is the lifecycle's logger (serve's and worker's), or none.
func (s *Store) log() *slog.Logger {
	if s.Lifecycle.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Lifecycle.Logger.With("component", "taskstore")
}

func (s *Store) observe(from state.State, rec state.Record) {
	if s.Lifecycle.Observer != nil {
		s.Lifecycle.Observer(from, rec)
	}
}

// Wait blocks until every task this store started has ended.
func (s *Store) Wait() { s.wg.Wait() }

// Recover is called at start-up: pending tasks start again (with a queue:
// go back in it if a crash lost their message); a task found in any other
// active state was interrupted by the restart and ends as failed with the
// stage recorded (with a shared queue: left to its worker or to
// redelivery, see SharedQueue). It returns the ids it acted on.
func (s *Store) Recover() ([]string, error) {
	var acted []string
	err := s.each(func(id string, m *state.Machine) {
		dir := s.Dir(id)
		cur := m.Current().State
		// A size-limited workspace comes back after a host reboot.
		if err := stage.Remount(context.Background(), stage.Layout{Dir: dir}); err != nil {
			s.log().Warn("cannot mount a task's size-limited workspace again", "task_id", id, "error", err)
		}
		switch {
		case cur.Terminal():
			return
		case s.Queue != nil && s.SharedQueue && cur != state.Pending:
			// Its message is still unacknowledged: the queue delivers it
			// again and RunQueued ends it as interrupted, unless a worker
			// of another process is running it now.
			return
		case cur == state.Pending:
			b, err := os.ReadFile(filepath.Join(dir, "manifest.yaml"))
			t, perr := manifest.Parse(b)
			switch {
			case err != nil || perr != nil:
				s.recoverTo(id, m, "manifest lost before staging", job.Errorf(job.CodeRunInterrupted, "task could not be restarted"))
			case s.Queue != nil:
				if err := s.requeue(id, t, b); err != nil {
					s.recoverTo(id, m, "could not be queued again after a restart", job.AsError(err))
				}
			case t.ParentID != "":
				// A waiting child waits again for a max_concurrent slot.
				parent, _ := s.manifest(t.ParentID)
				_ = s.schedule(t, b, parent) // no queue: cannot fail
			default:
				s.start(t, b)
			}
		default:
			s.recoverTo(id, m, "interrupted by a runner restart during "+string(cur),
				job.Errorf(job.CodeRunInterrupted, "the runner restarted while the task was %s", cur).With("stage", string(cur)))
		}
		// Counted as new in this process: its earlier states were counted
		// by the process that died.
		s.observe("", m.Current())
		acted = append(acted, id)
	})
	return acted, err
}

// Retain removes terminal tasks older than their retention age (measured
// from the last checkpoint) and returns their ids: the store's retention
// (store.Records.Retain), which leaves a task in progress in any process.
// A task's size-limited workspace is unmounted first; one that cannot be
// is kept and logged.
func (s *Store) Retain(now time.Time) []string {
	removed, err := s.records.Retain(now, store.Expiry{
		Ended: s.ending,
		Busy: func(id string) bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			_, ok := s.running[id]
			return ok
		},
		Release: func(id string) error { return stage.RemoveWorkspace(stage.Layout{Dir: s.Dir(id)}) },
		Skipped: func(id string, err error) {
			if job.CodeOf(err) != job.CodeJobNotFound {
				s.log().Warn("retention: cannot remove a task", "task_id", id, "error", err)
			}
		},
	})
	if err != nil {
		s.log().Warn("retention: cannot remove a task", "error", err)
	}
	return removed
}

// ending is a task's part in retention: terminal states, with their ages.
func (s *Store) ending(id string) (store.Ending, error) {
	m, err := s.Open(id)
	if err != nil {
		return store.Ending{}, err
	}
	rec := m.Current()
	end := store.Ending{Terminal: rec.State.Terminal(), At: rec.LastCheckpoint}
	switch rec.State {
	case state.Completed:
		end.Keep = s.Retention.Completed
	case state.Failed, state.FailedPreserved:
		end.Keep = s.Retention.Failed
	case state.Cancelled:
		end.Keep = s.Retention.Cancelled
	}
	return end, nil
}

// each calls fn for every task directory whose checkpoint opens; others
// (not tasks, or unrecoverable) are left for an operator.
func (s *Store) each(fn func(id string, m *state.Machine)) error {
	entries, err := os.ReadDir(s.Root)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot read the task store")
	}
	for _, e := range entries {
		if !e.IsDir() || !ValidID(e.Name()) {
			continue // the store's own entries: claims, removals, locks
		}
		if m, err := state.Open(s.Dir(e.Name())); err == nil {
			fn(e.Name(), m)
		}
	}
	return nil
}
