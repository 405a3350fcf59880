package linuxsandbox

import (
	"context"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Every sandbox, a kept one (backend.Sandboxes) or a one-shot run's
// (oneshot.go), is built the same way (prepare, boot): its init stays
// pid 1 and serves the runner's control socket (control.go,
// sandboxinit.go). Each Start is one process the init starts
// (process.go); Pause and Resume freeze its cgroup (freezer.go); ReadFile and WriteFile reach the workspace from
// the host through the init's root (/proc/<init>/root/workspace), with
// package safecopy's no-follow rules; Delete kills the init, which takes
// the pid namespace and every process down, and frees what Run frees.
// The thread that started a root runner's init stays locked for the
// sandbox's life (the init's parent-death signal is per thread).

var _ backend.Sandboxes = (*Backend)(nil)

// outputDrain bounds how long an exec's output pipes may stay open after
// it exited (a background process it left can hold them).
const outputDrain = 2 * time.Second

// Create implements backend.Sandboxes.
func (b *Backend) Create(ctx context.Context, spec backend.Spec) (backend.Sandbox, error) {
	spec.Argv, spec.Env, spec.Cwd, spec.TTY = nil, nil, ".", false
	s, _, err := b.create(ctx, spec, true, true)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// create builds a sandbox for spec. A pausable one gets a freezer
// group; a one-shot run's does not (Run never pauses), and with
// Spec.TTY its init holds the run's terminal (Spec.Stdin) for
// /dev/console. With wait it returns once the init is ready; without,
// once the init was started (a one-shot run sends its workload at once,
// to be served as soon as the init is ready, and learns a setup failure
// from Start). On an error the Outcome still says what was and was not
// enforced.
func (b *Backend) create(ctx context.Context, spec backend.Spec, pausable, wait bool) (*Sandbox, backend.Outcome, error) {
	t0 := time.Now()
	p, err := b.prepare(spec)
	if err != nil {
		return nil, backend.Outcome{}, err
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		p.release()
		return nil, enforced(spec, p.cfg, p.slot, p.disk), job.Wrap(job.CodeBackendSetupFailed, err, "cannot create the control socket")
	}
	var console *os.File
	if f, ok := spec.Stdin.(*os.File); ok && spec.TTY {
		console = f
	}
	t1 := time.Now()
	initEnd := os.NewFile(uintptr(pair[1]), "control-init")
	in, err := b.boot(spec, p.cfg, p.slot, p.disk, console, initEnd, pausable)
	initEnd.Close()
	if err != nil {
		unix.Close(pair[0])
		p.release()
		return nil, in.out, err
	}
	t2 := time.Now()
	s := &Sandbox{spec: spec, p: p, in: in, fd: pair[0], waiting: map[uint64]chan ctlReply{}, dialing: map[uint64]chan dialReply{}, readerDone: make(chan struct{})}
	s.phases = CreatePhases{Prepare: t1.Sub(t0), Boot: t2.Sub(t1)}
	if !wait {
		go s.read()
		return s, in.out, nil
	}
	// The init reports ready once the sandbox is built, or why not.
	stop := context.AfterFunc(ctx, func() { in.cmd.Process.Kill() })
	var first ctlReply
	fds, err := ctlReceive(s.fd, make([]byte, ctlMaxReply), &first)
	closeAll(fds)
	stop()
	if err == nil && first.Op == "ready" {
		s.phases.Ready = time.Since(t2)
		s.ready = true
		go s.read()
		return s, in.out, nil
	}
	close(s.readerDone)
	s.teardown(false)
	if ctx.Err() != nil {
		return nil, in.out, job.Wrap(job.CodeRunCanceled, ctx.Err(), "sandbox creation canceled")
	}
	return nil, in.out, setupError(first, err)
}

// setupError is why an init did not get ready: it ended (err), or it
// reported the stage that failed (r).
func setupError(r ctlReply, err error) error {
	switch {
	case err != nil:
		return job.Wrap(job.CodeBackendSetupFailed, err, "the sandbox init ended before it was ready")
	case r.Stage == cowStage:
		// The host cannot make the overlay the request asked for
		// (cow.go): refused, never bound read-only instead.
		return job.Errorf(job.CodeBackendUnavail, "linux_sandbox cannot make a copy-on-write mount here (workspace.readonly_mounts_mode copy_on_write): %s", r.Error).
			With("stage", r.Stage).With("reason", r.Error)
	case r.Stage == imageRootStage:
		return job.Errorf(job.CodeBackendUnavail, "linux_sandbox cannot mount an image's root here (an overlay over an idmapped layer in a user namespace): %s", r.Error).
			With("stage", r.Stage).With("reason", r.Error).With("backend", Kind)
	}
	return job.Errorf(job.CodeBackendSetupFailed, "sandbox %s failed: %s", r.Stage, r.Error).With("stage", r.Stage)
}

// CreatePhases are how long the steps of a sandbox's creation took.
type CreatePhases struct {
	// Prepare is the host's part: the root directory, the id slot, the
	// workspace handed to it (or its disk filled), binds, egress socket.
	Prepare time.Duration
	// Boot is the init started in its namespaces and cgroups, with its
	// mounts and config sent.
	Boot time.Duration
	// Ready is the init building the sandbox (mounts, pivot_root,
	// Landlock, seccomp) until it said ready on the control socket.
	Ready time.Duration
}

// CreatePhases reports how long s's creation took, step by step (for
// benchmarks: bench/sandbox).
func (s *Sandbox) CreatePhases() CreatePhases { return s.phases }

// Sandbox is a kept linux_sandbox.
type Sandbox struct {
	spec backend.Spec
	p    *prepared
	in   booted
	// fd is the runner's end of the control socket.
	fd int

	mu      sync.Mutex
	deleted bool
	dead    bool // the init is gone
	nextID  uint64
	waiting map[uint64]chan ctlReply
	// dialing are the connects waiting for the init (ports.go).
	dialing map[uint64]chan dialReply
	// ops counts the Execs, ReadFiles and WriteFiles in flight: Delete
	// reaps the init (freeing its pid) only after them.
	ops        sync.WaitGroup
	readerDone chan struct{}
	phases     CreatePhases
	// ready is set once the init said so; setupErr is why it never will
	// (a one-shot run's sandbox, created without waiting).
	ready    bool
	setupErr error
}

var _ backend.Sandbox = (*Sandbox)(nil)

// ID implements backend.Sandbox.
func (s *Sandbox) ID() string { return s.spec.JobID }

// read delivers the init's replies to the processes waiting for them
// until the socket ends; then every waiting process learns the init is
// gone. Before the init is ready, its first message is ready or why not.
func (s *Sandbox) read() {
	defer close(s.readerDone)
	buf := make([]byte, ctlMaxReply)
	for {
		var r ctlReply
		fds, err := ctlReceive(s.fd, buf, &r)
		s.mu.Lock()
		// Only a connect the runner is waiting for is handed a
		// descriptor (ports.go); every other one is closed here.
		if err == nil {
			fds = s.deliverDial(r, fds)
		}
		closeAll(fds)
		if !s.ready {
			if err == nil && r.Op == "ready" {
				s.ready = true
				s.mu.Unlock()
				continue
			}
			s.setupErr = setupError(r, err)
			err = s.setupErr
		}
		if err != nil {
			s.dead = true
			for _, ch := range s.waiting {
				close(ch)
			}
			s.waiting = map[uint64]chan ctlReply{}
			for _, ch := range s.dialing {
				close(ch)
			}
			s.dialing = map[uint64]chan dialReply{}
			s.mu.Unlock()
			return
		}
		if ch, ok := s.waiting[r.ID]; ok && len(ch) < cap(ch) {
			ch <- r
		}
		s.mu.Unlock()
	}
}

// begin counts an operation in, or says why the sandbox takes none.
func (s *Sandbox) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.deleted:
		return job.Errorf(job.CodeJobNotFound, "sandbox %s was deleted", s.ID()).With("sandbox", s.ID())
	case s.dead:
		return job.Errorf(job.CodeBackendSetupFailed, "the init of sandbox %s is gone", s.ID()).With("sandbox", s.ID())
	}
	s.ops.Add(1)
	return nil
}

func (s *Sandbox) isDeleted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleted
}

// Pause implements backend.Sandbox with the cgroup freezer.
func (s *Sandbox) Pause(ctx context.Context) error { return s.freeze(ctx, true) }

// Resume implements backend.Sandbox.
func (s *Sandbox) Resume(ctx context.Context) error { return s.freeze(ctx, false) }

func (s *Sandbox) freeze(ctx context.Context, frozen bool) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.ops.Done()
	if s.in.freezer == nil {
		return job.Wrap(job.CodeBackendUnavail, s.in.freezeErr, "linux_sandbox cannot pause this sandbox: "+s.in.freezeErr.Error()).
			With("backend", Kind)
	}
	if err := s.in.freezer.set(ctx, frozen); err != nil {
		return job.Wrap(job.CodeBackendSetupFailed, err, "cannot freeze or thaw the sandbox's cgroup")
	}
	return nil
}

// workspace is the host's path to the sandbox's /workspace: through the
// init's root, so an overlay or a disk-limited workspace is seen as the
// sandbox sees it.
func (s *Sandbox) workspace() string { return s.root() + WorkspaceMount }

// root is the host's path to the sandbox's root, through its init.
func (s *Sandbox) root() string { return "/proc/" + strconv.Itoa(s.in.cmd.Process.Pid) + "/root" }

// ReadFile implements backend.Sandbox.
func (s *Sandbox) ReadFile(ctx context.Context, rel string, w io.Writer, limit int64) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.ops.Done()
	return backend.ReadWorkspaceFile(ctx, s.workspace(), rel, w, limit)
}

// WriteFile implements backend.Sandbox.
func (s *Sandbox) WriteFile(ctx context.Context, rel string, r io.Reader, mode fs.FileMode) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.ops.Done()
	return backend.WriteWorkspaceFile(ctx, s.workspace(), rel, r, mode)
}

// Delete implements backend.Sandbox.
func (s *Sandbox) Delete(ctx context.Context) error {
	s.mu.Lock()
	if s.deleted {
		s.mu.Unlock()
		return nil
	}
	s.deleted = true
	s.mu.Unlock()
	s.teardown(false)
	return nil
}

// teardown kills the init (and with it the pid namespace), waits for
// every operation in flight, and frees what the sandbox holds. With
// lazy (a one-shot run's) the emptied cgroups are removed in the
// background, as exiting processes may keep them busy for a moment.
func (s *Sandbox) teardown(lazy bool) {
	if s.in.freezer != nil {
		s.in.freezer.thaw()
	}
	s.in.cmd.Process.Kill()
	unix.Shutdown(s.fd, unix.SHUT_RDWR)
	<-s.readerDone
	s.ops.Wait()
	s.in.cmd.Wait()
	s.in.started()
	unix.Close(s.fd)
	s.p.release()
	cg, fz := s.in.cg, s.in.freezer
	remove := func() {
		if cg != nil {
			cg.remove()
		}
		if fz != nil {
			fz.remove()
		}
	}
	if lazy {
		lazyRemovals.Add(1)
		go func() {
			defer lazyRemovals.Done()
			remove()
		}()
		return
	}
	remove()
}

// lazyRemovals counts the one-shot runs' cgroup removals still going on
// in the background (teardown); Backend.Close waits for them, so a
// process that exits right after its last Run (agent-runner run) leaves
// no empty groups behind.
var lazyRemovals sync.WaitGroup

// closeWait bounds how long Close waits for background removals: a
// group a stray process keeps busy is given up on (removeCgroupDir
// retries for half a second).
const closeWait = 5 * time.Second

// Close waits until the cgroups of this process's finished one-shot runs
// are removed (at most closeWait). The backend stays usable.
func (b *Backend) Close() error {
	done := make(chan struct{})
	go func() {
		lazyRemovals.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
	return nil
}

var _ backend.UsageSampler = (*Sandbox)(nil)

// SampleUsage implements backend.UsageSampler with the sandbox's
// cgroups; a sandbox without them, or one with no process left, has
// nothing to report.
func (s *Sandbox) SampleUsage() (backend.Usage, bool) {
	if s.in.cg == nil || s.isDeleted() {
		return backend.Usage{}, false
	}
	u := s.in.cg.sample()
	return u, u.Processes > 0
}
