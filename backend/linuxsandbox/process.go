package linuxsandbox

import (
	"context"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// A process is one exec the sandbox's init started at the runner's
// request: the runner holds its stdio (backend.Stdio: pipes, or a
// terminal whose master stays on the host, so Resize is an ioctl here),
// supervises its timeout, and learns its exit from the init's reply.
// Signals go through the control socket, which the init serves in
// order: a signal sent right after the exec request reaches the exec.

// Start implements backend.Sandbox.
func (s *Sandbox) Start(ctx context.Context, e backend.Exec) (backend.Process, error) {
	p, err := s.start(ctx, e, false)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Exec implements backend.Sandbox.
func (s *Sandbox) Exec(ctx context.Context, e backend.Exec) (backend.Outcome, error) {
	p, err := s.start(ctx, e, false)
	if err != nil {
		return s.outcome(), err
	}
	return p.Wait(ctx)
}

// outcome is a fresh Outcome with what the sandbox enforces.
func (s *Sandbox) outcome() backend.Outcome {
	out := s.in.out
	out.Enforced, out.NotEnforced = slices.Clone(out.Enforced), slices.Clone(out.NotEnforced)
	return out
}

// process is a started exec.
type process struct {
	s     *Sandbox
	id    uint64
	pid   int
	final bool
	stdio *backend.Stdio
	// stop ends the supervision's context: Wait's ctx ended.
	stop context.CancelFunc
	// exited is closed once out, err and the fields below are set.
	exited chan struct{}
	out    backend.Outcome
	err    error
	// stopReason is the supervision's ("" when the process ended on its
	// own); gone says the init died under it.
	stopReason string
	gone       bool
}

var _ backend.Process = (*process)(nil)

// start asks the init to start e and waits until it did. A final exec is
// a one-shot run's workload (ctlRequest.Final).
func (s *Sandbox) start(ctx context.Context, e backend.Exec, final bool) (*process, error) {
	cwd, err := backend.ExecCwd(e)
	if err != nil {
		return nil, err
	}
	env := backend.TerminalEnv(e.Env, e.Terminal)
	if img := s.p.image; img != nil {
		// The image's defaults under the exec's own; its working
		// directory for an exec that names none.
		env = backend.MergeEnv(img.img.Env, env)
		if e.Cwd == "" && img.img.WorkingDir != "" && filepath.IsAbs(img.img.WorkingDir) {
			cwd = filepath.Clean(img.img.WorkingDir)
		}
	}
	if s.p.cfg.EgressSocket != "" {
		env = egressEnv(env, s.p.cfg.EgressCA != "")
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	// A terminal is opened on the sandbox's own devpts, through the
	// init's root, so the process finds it under its /dev/pts.
	owner := s.p.workloadHostID()
	stdio, err := backend.NewStdioOn(e, s.root()+"/dev/pts", owner)
	if err != nil {
		s.ops.Done()
		return nil, err
	}
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	ch := make(chan ctlReply, 2) // started or error, then exit
	s.waiting[id] = ch
	dead := s.dead
	s.mu.Unlock()
	p := &process{s: s, id: id, final: final, stdio: stdio, exited: make(chan struct{})}
	superviseCtx, stop := context.WithCancel(context.Background())
	p.stop = stop
	// A one-shot run reads its cgroup once, after the Wait (Run).
	cg := s.in.cg
	if final {
		cg = nil
	}
	oomBefore := cg != nil && cg.oomKilled()
	err = ctlSend(s.fd, ctlRequest{Op: "exec", ID: id, Argv: e.Argv, Env: env, Cwd: cwd, Terminal: e.Terminal != nil || e.TTY, Final: final},
		int(stdio.In.Fd()), int(stdio.Out.Fd()), int(stdio.Err.Fd()))
	stdio.Started()
	fail := func(err error) (*process, error) {
		stop()
		stdio.Abort()
		s.unwait(id)
		s.ops.Done()
		return nil, err
	}
	if err != nil || dead {
		if err := s.awaitSetup(); err != nil {
			return fail(err)
		}
		return fail(job.Errorf(job.CodeRunSpawnFailed, "cannot reach the sandbox init: %v", err))
	}
	var first ctlReply
	var ok bool
	select {
	case first, ok = <-ch:
	case <-ctx.Done():
		// Served after the exec request: it kills the exec if it started.
		ctlSend(s.fd, ctlRequest{Op: "signal", ID: id, Sig: int(unix.SIGKILL)})
		return fail(job.Wrap(job.CodeRunCanceled, ctx.Err(), "canceled before the exec started"))
	}
	switch {
	case !ok && s.failedSetup() != nil:
		return fail(s.failedSetup())
	case !ok && s.isDeleted():
		return fail(job.Errorf(job.CodeJobNotFound, "sandbox %s was deleted", s.ID()).With("sandbox", s.ID()))
	case !ok:
		return fail(job.Errorf(job.CodeBackendSetupFailed, "the init of sandbox %s is gone", s.ID()).With("sandbox", s.ID()))
	case first.Op == "error":
		return fail(job.Errorf(job.CodeRunSpawnFailed, "sandbox exec failed: %s", first.Error).With("stage", "exec").With("argv0", e.Argv[0]))
	}
	p.pid = first.Pid
	go p.watch(superviseCtx, backend.ExecLimits(s.spec.Limits, e), ch, cg, oomBefore)
	return p, nil
}

// awaitSetup is why the init never got ready: nil once it was, else
// once the reader learnt why not (the init ended).
func (s *Sandbox) awaitSetup() error {
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if ready {
		return nil
	}
	<-s.readerDone
	return s.failedSetup()
}

// failedSetup is why the init never got ready, if it did not.
func (s *Sandbox) failedSetup() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setupErr
}

// unwait forgets the reply channel of exec id.
func (s *Sandbox) unwait(id uint64) {
	s.mu.Lock()
	delete(s.waiting, id)
	s.mu.Unlock()
}

// watch supervises p until the init reports its exit (or is gone), then
// drains its output and sets its outcome, with peak memory and OOM from
// cg (nil: not read).
func (p *process) watch(ctx context.Context, lim backend.Limits, ch chan ctlReply, cg *cgroup, oomBefore bool) {
	s := p.s
	defer s.ops.Done()
	defer close(p.exited)
	defer p.stop()
	done := make(chan struct{})
	reason := make(chan string, 1)
	go func() {
		reason <- backend.Supervise(ctx, lim, done, func(force bool) {
			sig := unix.SIGTERM
			if force {
				sig = unix.SIGKILL
			}
			_ = ctlSend(s.fd, ctlRequest{Op: "signal", ID: p.id, Sig: int(sig)})
		})
	}()
	end, ok := <-ch
	gone := !ok
	s.unwait(p.id)
	close(done)
	p.stopReason = <-reason
	p.stdio.Drain(outputDrain)
	out := s.outcome()
	out.Reason = p.stopReason
	p.out, p.gone = out, gone
	switch {
	case gone && s.isDeleted():
		// Delete killed it with the sandbox.
		p.out.Signal = "SIGKILL"
		if p.out.Reason == "" {
			p.out.Reason = job.ReasonCanceled
		}
		return
	case gone:
		p.err = job.Errorf(job.CodeBackendSetupFailed, "the init of sandbox %s is gone", s.ID()).With("sandbox", s.ID())
		return
	}
	p.out.CPUTime = time.Duration(end.CPUNanos)
	p.out.ExecDenials, p.out.ExecDenialsTotal = end.ExecDenials, end.ExecDenialsTotal
	if cg != nil {
		p.out.PeakMemoryBytes, _ = cg.usage()
	}
	if end.ExitCode != nil {
		p.out.ExitCode = end.ExitCode
		if p.out.Reason == "" {
			p.out.Reason = job.ReasonExit
		}
		return
	}
	p.out.Signal = unix.SignalName(syscall.Signal(end.Signal))
	if p.out.Reason == "" {
		p.out.Reason = job.ReasonSignal
		if end.Signal == int(unix.SIGKILL) && !oomBefore && cg != nil && cg.oomKilled() {
			p.out.Reason = job.ReasonOOM
		}
	}
}

// ID implements backend.Process.
func (p *process) ID() int { return p.pid }

// Wait implements backend.Process.
func (p *process) Wait(ctx context.Context) (backend.Outcome, error) {
	stop := context.AfterFunc(ctx, p.stop)
	defer stop()
	<-p.exited
	out := p.out
	out.Enforced, out.NotEnforced = slices.Clone(out.Enforced), slices.Clone(out.NotEnforced)
	return out, p.err
}

// Signal implements backend.Process.
func (p *process) Signal(sig syscall.Signal) error {
	// Counted in, so the socket stays open while it is used.
	if p.s.begin() != nil {
		return nil // the sandbox, and so the process, is gone
	}
	defer p.s.ops.Done()
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := ctlSend(p.s.fd, ctlRequest{Op: "signal", ID: p.id, Sig: int(sig)}); err != nil {
		return job.Wrap(job.CodeBackendSetupFailed, err, "cannot reach the sandbox init")
	}
	return nil
}

// Resize implements backend.Process.
func (p *process) Resize(cols, rows uint16) error { return p.stdio.Resize(cols, rows) }

// CloseStdin implements backend.Process.
func (p *process) CloseStdin() error { return p.stdio.CloseStdin() }
