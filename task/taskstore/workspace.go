package taskstore

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/state"
)

// ValidID reports whether id can name a task: the store's one id rule
// (store.ValidID), which every manifest's metadata.id and every minted id
// follow.
func ValidID(id string) bool { return store.ValidID(id) }

// Open returns a stored task's state machine, or job.not_found.
func (s *Store) Open(id string) (*state.Machine, error) {
	if !ValidID(id) {
		return nil, job.Errorf(job.CodeJobNotFound, "task not found").With("task_id", id)
	}
	m, err := state.Open(s.Dir(id))
	if err != nil {
		return nil, job.Errorf(job.CodeJobNotFound, "task not found").With("task_id", id)
	}
	return m, nil
}

// Workspace returns the preserved workspace (inbox) of a terminal task:
// job.not_terminal while the task is active, job.not_found when the
// workspace was destroyed (failure_action destroy, or Destroy).
func (s *Store) Workspace(id string) (stage.Layout, error) {
	m, err := s.Open(id)
	if err != nil {
		return stage.Layout{}, err
	}
	rec := m.Current()
	if !rec.State.Terminal() {
		return stage.Layout{}, job.Errorf(job.CodeNotTerminal, "task %s is %s; its workspace is in use", id, rec.State).With("state", string(rec.State))
	}
	l := stage.Layout{Dir: s.Dir(id)}
	if fi, err := os.Stat(l.Inbox()); err != nil || !fi.IsDir() {
		return stage.Layout{}, job.Errorf(job.CodeJobNotFound, "task %s has no workspace left (destroyed, or failure_action destroy)", id).With("task_id", id)
	}
	return l, nil
}

// lockFile guards a task's workspace: shells hold it shared, Destroy
// takes it exclusively.
const lockFile = "workspace.lock"

// LockWorkspace takes a shared lock on a task's workspace (held by `task
// shell` while it runs) and returns its release.
func (s *Store) LockWorkspace(id string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.Dir(id), lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot lock the workspace")
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		f.Close()
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot lock the workspace")
	}
	return func() { f.Close() }, nil
}

// Destroy removes a terminal task's workspace (the inbox and base.git)
// and records workspace_destroyed; the state, logs and artifacts stay. An
// active task must be cancelled first (job.not_terminal). Destroying a
// task whose workspace is already gone does nothing.
func (s *Store) Destroy(id string) error {
	m, err := s.Open(id)
	if err != nil {
		return err
	}
	if st := m.Current().State; !st.Terminal() {
		return job.Errorf(job.CodeNotTerminal, "task %s is %s; cancel it first", id, st).With("state", string(st))
	}
	l := stage.Layout{Dir: s.Dir(id)}
	if _, err := os.Lstat(l.Inbox()); os.IsNotExist(err) {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(s.Dir(id), lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot lock the workspace")
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return job.Errorf(job.CodeJobConflict, "task %s's workspace is in use by a task shell", id)
	}
	if err := stage.RemoveWorkspace(l); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot remove the workspace")
	}
	return m.Note("workspace_destroyed", "workspace removed on request")
}
