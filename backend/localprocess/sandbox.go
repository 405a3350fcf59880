package localprocess

import (
	"context"
	"io"
	"io/fs"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// A local_process sandbox is its workspace directory and the process
// groups its execs started: no isolation, as for Run. Each Exec runs in
// a session (and so a process group) of its own; Pause stops every group
// with SIGSTOP and Resume continues them with SIGCONT; Delete kills
// them. A process that left its group (setsid) escapes all three.

var _ backend.Sandboxes = Backend{}

// Create implements backend.Sandboxes: it checks spec as Run would and
// starts nothing.
func (b Backend) Create(ctx context.Context, spec backend.Spec) (backend.Sandbox, error) {
	s, err := b.newSandbox(spec)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(spec.Workspace.Dir); err != nil || !fi.IsDir() {
		return nil, job.Errorf(job.CodeBackendSetupFailed, "the workspace %s is not a directory", spec.Workspace.Dir)
	}
	return s, nil
}

// newSandbox is a sandbox of spec, if this backend can honour it.
func (b Backend) newSandbox(spec backend.Spec) (*Sandbox, error) {
	if err := b.check(spec); err != nil {
		return nil, err
	}
	return &Sandbox{spec: spec, groups: map[int]bool{}, running: closedChan()}, nil
}

// Sandbox is a local_process sandbox.
type Sandbox struct {
	spec backend.Spec

	mu      sync.Mutex
	deleted bool
	// running is closed while the sandbox is not paused.
	running chan struct{}
	// groups are the process groups of every exec not known to be gone.
	groups map[int]bool
	execs  sync.WaitGroup
}

var _ backend.Sandbox = (*Sandbox)(nil)

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// ID implements backend.Sandbox.
func (s *Sandbox) ID() string { return s.spec.JobID }

// enter waits for a paused sandbox to resume, then counts an exec in
// so that Delete waits for it.
func (s *Sandbox) enter(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.deleted {
			s.mu.Unlock()
			return errDeleted(s.ID())
		}
		running := s.running
		select {
		case <-running:
		default:
			s.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return job.Wrap(job.CodeRunCanceled, ctx.Err(), "canceled while the sandbox was paused")
			}
		}
		s.execs.Add(1)
		s.mu.Unlock()
		return nil
	}
}

// started records a new exec's group, stopping it at once when the
// sandbox was paused or deleted in the meantime.
func (s *Sandbox) started(pgid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[pgid] = true
	switch {
	case s.deleted:
		_ = unix.Kill(-pgid, unix.SIGKILL)
	case !isClosed(s.running):
		_ = unix.Kill(-pgid, unix.SIGSTOP)
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// signalGroups sends sig to every group still alive, forgetting the rest.
// s.mu is held.
func (s *Sandbox) signalGroups(sig unix.Signal) {
	for pgid := range s.groups {
		if err := unix.Kill(-pgid, sig); err == unix.ESRCH {
			delete(s.groups, pgid)
		}
	}
}

// Pause implements backend.Sandbox with SIGSTOP to every group.
func (s *Sandbox) Pause(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return errDeleted(s.ID())
	}
	if isClosed(s.running) {
		s.running = make(chan struct{})
	}
	s.signalGroups(unix.SIGSTOP)
	return nil
}

// Resume implements backend.Sandbox with SIGCONT to every group.
func (s *Sandbox) Resume(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return errDeleted(s.ID())
	}
	s.signalGroups(unix.SIGCONT)
	if !isClosed(s.running) {
		close(s.running)
	}
	return nil
}

// ReadFile implements backend.Sandbox.
func (s *Sandbox) ReadFile(ctx context.Context, rel string, w io.Writer, limit int64) error {
	if err := s.live(); err != nil {
		return err
	}
	return backend.ReadWorkspaceFile(ctx, s.spec.Workspace.Dir, rel, w, limit)
}

// WriteFile implements backend.Sandbox.
func (s *Sandbox) WriteFile(ctx context.Context, rel string, r io.Reader, mode fs.FileMode) error {
	if err := s.live(); err != nil {
		return err
	}
	return backend.WriteWorkspaceFile(ctx, s.spec.Workspace.Dir, rel, r, mode)
}

// Delete implements backend.Sandbox: it kills every group and waits for
// the execs to return.
func (s *Sandbox) Delete(ctx context.Context) error {
	s.mu.Lock()
	if s.deleted {
		s.mu.Unlock()
		return nil
	}
	s.deleted = true
	s.signalGroups(unix.SIGKILL)
	if !isClosed(s.running) {
		close(s.running)
	}
	s.mu.Unlock()
	s.execs.Wait()
	return nil
}

func (s *Sandbox) live() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return errDeleted(s.ID())
	}
	return nil
}

func errDeleted(id string) error {
	return job.Errorf(job.CodeJobNotFound, "sandbox %s was deleted", id).With("sandbox", id)
}
