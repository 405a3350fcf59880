package linuxsandbox

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safepath"
)

// A kept sandbox (backend.Sandboxes) is built exactly as a one-shot run's
// (prepare, boot), but its init does not run a workload: it stays pid 1
// and serves the runner's control socket (control.go, sandboxinit.go).
// Each Exec is one process the init starts; Pause and Resume freeze its
// cgroup (freezer.go); ReadFile and WriteFile reach the workspace from
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
	p, err := b.prepare(spec)
	if err != nil {
		return nil, err
	}
	p.cfg.Control = true
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		p.release()
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot create the control socket")
	}
	initEnd := os.NewFile(uintptr(pair[1]), "control-init")
	in, err := b.boot(spec, p.cfg, p.slot, p.disk, initStdio{}, initEnd)
	initEnd.Close()
	if err != nil {
		unix.Close(pair[0])
		p.release()
		return nil, err
	}
	s := &Sandbox{spec: spec, p: p, in: in, fd: pair[0], waiting: map[uint64]chan ctlReply{}, readerDone: make(chan struct{})}
	// The init reports ready once the sandbox is built, or why not.
	stop := context.AfterFunc(ctx, func() { in.cmd.Process.Kill() })
	var first ctlReply
	fds, err := ctlReceive(s.fd, make([]byte, ctlMaxMessage), &first)
	closeAll(fds)
	stop()
	if err != nil || first.Op != "ready" {
		close(s.readerDone)
		s.teardown()
		switch {
		case ctx.Err() != nil:
			return nil, job.Wrap(job.CodeRunCanceled, ctx.Err(), "sandbox creation canceled")
		case err != nil:
			return nil, job.Wrap(job.CodeBackendSetupFailed, err, "the sandbox init ended before it was ready")
		case first.Stage == cowStage:
			return nil, job.Errorf(job.CodeBackendUnavail, "linux_sandbox cannot make a copy-on-write mount here (workspace.readonly_mounts_mode copy_on_write): %s", first.Error).
				With("stage", first.Stage).With("reason", first.Error)
		}
		return nil, job.Errorf(job.CodeBackendSetupFailed, "sandbox %s failed: %s", first.Stage, first.Error).With("stage", first.Stage)
	}
	go s.read()
	return s, nil
}

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
	// ops counts the Execs, ReadFiles and WriteFiles in flight: Delete
	// reaps the init (freeing its pid) only after them.
	ops        sync.WaitGroup
	readerDone chan struct{}
}

var _ backend.Sandbox = (*Sandbox)(nil)

// ID implements backend.Sandbox.
func (s *Sandbox) ID() string { return s.spec.JobID }

// read delivers the init's replies to the Execs waiting for them until
// the socket ends; then every waiting Exec learns the init is gone.
func (s *Sandbox) read() {
	defer close(s.readerDone)
	buf := make([]byte, ctlMaxMessage)
	for {
		var r ctlReply
		fds, err := ctlReceive(s.fd, buf, &r)
		closeAll(fds) // the init never hands the runner a descriptor
		s.mu.Lock()
		if err != nil {
			s.dead = true
			for _, ch := range s.waiting {
				close(ch)
			}
			s.waiting = map[uint64]chan ctlReply{}
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

// Exec implements backend.Sandbox.
func (s *Sandbox) Exec(ctx context.Context, e backend.Exec) (backend.Outcome, error) {
	out := s.in.out
	out.Enforced, out.NotEnforced = slices.Clone(out.Enforced), slices.Clone(out.NotEnforced)
	cwd, err := safepath.Clean(e.Cwd)
	if e.Cwd == "" {
		cwd, err = ".", nil
	}
	if err != nil {
		return out, job.Wrap(job.CodePathEscape, err, "the exec's cwd leaves the workspace").With("cwd", e.Cwd)
	}
	if len(e.Argv) == 0 {
		return out, job.Errorf(job.CodeRunSpawnFailed, "empty argv")
	}
	env := e.Env
	if s.p.cfg.EgressSocket != "" {
		env = egressEnv(env, s.p.cfg.EgressCA != "")
	}
	if err := s.begin(); err != nil {
		return out, err
	}
	defer s.ops.Done()
	stdin, closeStdin, err := execStdin(e.Stdin)
	if err != nil {
		return out, job.Wrap(job.CodeRunIOFailed, err, "cannot give the exec its stdin")
	}
	defer closeStdin()
	stdout, err := newOutput(e.Stdout)
	if err != nil {
		return out, job.Wrap(job.CodeRunIOFailed, err, "cannot create output pipes")
	}
	stderr, err := newOutput(e.Stderr)
	if err != nil {
		stdout.abort()
		return out, job.Wrap(job.CodeRunIOFailed, err, "cannot create output pipes")
	}
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	ch := make(chan ctlReply, 2) // started or error, then exit
	s.waiting[id] = ch
	dead := s.dead
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
	}()
	oomBefore := s.in.cg != nil && s.in.cg.oomKilled()
	err = ctlSend(s.fd, ctlRequest{Op: "exec", ID: id, Argv: e.Argv, Env: env, Cwd: cwd}, int(stdin.Fd()), int(stdout.w.Fd()), int(stderr.w.Fd()))
	stdout.started()
	stderr.started()
	if err != nil || dead {
		stdout.abort()
		stderr.abort()
		return out, job.Errorf(job.CodeRunSpawnFailed, "cannot reach the sandbox init: %v", err)
	}
	// Requests are served in order: a signal sent after the exec request
	// reaches the exec, even one sent before the init answered (a
	// sandbox paused before it could).
	done := make(chan struct{})
	reason := make(chan string, 1)
	go func() {
		reason <- backend.Supervise(ctx, backend.ExecLimits(s.spec.Limits, e), done, func(force bool) {
			sig := unix.SIGTERM
			if force {
				sig = unix.SIGKILL
			}
			_ = ctlSend(s.fd, ctlRequest{Op: "signal", ID: id, Sig: int(sig)})
		})
	}()
	var end ctlReply
	gone := true
	for r := range ch {
		if r.Op == "started" {
			continue
		}
		end, gone = r, false
		break
	}
	close(done)
	out.Reason = <-reason
	closeStdin()
	stdout.wait(outputDrain)
	stderr.wait(outputDrain)
	switch {
	case gone && s.isDeleted():
		// Delete killed it with the sandbox.
		out.Signal = "SIGKILL"
		if out.Reason == "" {
			out.Reason = job.ReasonCanceled
		}
		return out, nil
	case gone:
		return out, job.Errorf(job.CodeBackendSetupFailed, "the init of sandbox %s is gone", s.ID()).With("sandbox", s.ID())
	case end.Op == "error":
		return out, job.Errorf(job.CodeRunSpawnFailed, "sandbox exec failed: %s", end.Error).With("argv0", e.Argv[0])
	}
	out.CPUTime = time.Duration(end.CPUNanos)
	out.ExecDenials, out.ExecDenialsTotal = end.ExecDenials, end.ExecDenialsTotal
	if s.in.cg != nil {
		out.PeakMemoryBytes, _ = s.in.cg.usage()
	}
	if end.ExitCode != nil {
		out.ExitCode = end.ExitCode
		if out.Reason == "" {
			out.Reason = job.ReasonExit
		}
		return out, nil
	}
	out.Signal = unix.SignalName(syscall.Signal(end.Signal))
	if out.Reason == "" {
		out.Reason = job.ReasonSignal
		if end.Signal == int(unix.SIGKILL) && !oomBefore && s.in.cg != nil && s.in.cg.oomKilled() {
			out.Reason = job.ReasonOOM
		}
	}
	return out, nil
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
func (s *Sandbox) workspace() string {
	return "/proc/" + strconv.Itoa(s.in.cmd.Process.Pid) + "/root" + WorkspaceMount
}

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
	s.teardown()
	return nil
}

// teardown kills the init (and with it the pid namespace), waits for
// every operation in flight, and frees what the sandbox holds.
func (s *Sandbox) teardown() {
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
	if s.in.cg != nil {
		s.in.cg.remove()
	}
	if s.in.freezer != nil {
		s.in.freezer.remove()
	}
	s.p.release()
}

// execStdin is an exec's stdin as a file to send: /dev/null, the caller's
// file, or a pipe fed from its reader (backend.StdinFile).
func execStdin(r io.Reader) (*os.File, func(), error) {
	if r == nil {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, nil, err
		}
		return f, sync.OnceFunc(func() { f.Close() }), nil
	}
	in, closeIn, err := backend.StdinFile(r)
	if err != nil {
		return nil, nil, err
	}
	f, ok := in.(*os.File)
	if !ok {
		closeIn()
		return nil, nil, fmt.Errorf("stdin of type %T", in)
	}
	return f, sync.OnceFunc(closeIn), nil
}

// output copies what an exec writes to a pipe into the caller's writer.
type output struct {
	r, w *os.File
	done chan struct{}
}

func newOutput(dst io.Writer) (*output, error) {
	if dst == nil {
		dst = io.Discard
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	o := &output{r: r, w: w, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				dst.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return o, nil
}

// started closes the runner's copy of the write end, sent to the init.
func (o *output) started() { o.w.Close() }

// abort stops the copy of an exec that never started.
func (o *output) abort() { o.wait(0) }

// wait waits for EOF for up to max, then stops the copy.
func (o *output) wait(max time.Duration) {
	o.w.Close()
	select {
	case <-o.done:
	case <-time.After(max):
		o.r.SetReadDeadline(time.Now())
		<-o.done
	}
	o.r.Close()
}
