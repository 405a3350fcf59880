package localprocess

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// A process is a child of the runner in a session (and so a process
// group) of its own, whose stdio the runner holds (backend.Stdio).

// drainWait bounds how long output pipes may stay open after the process
// ended (a child that escaped with setsid can hold them).
const drainWait = 2 * time.Second

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
		return outcome(s.spec), err
	}
	return p.Wait(ctx)
}

// process is a started exec.
type process struct {
	s     *Sandbox
	cmd   *exec.Cmd
	stdio *backend.Stdio
	stop  context.CancelFunc
	// exited is closed once out is set.
	exited chan struct{}
	out    backend.Outcome
}

var _ backend.Process = (*process)(nil)

// start starts e, once the sandbox is not paused. A final exec is a
// one-shot run's workload: when it exits, its group is killed.
func (s *Sandbox) start(ctx context.Context, e backend.Exec, final bool) (*process, error) {
	cwd, err := backend.ExecCwd(e)
	if err != nil {
		return nil, err
	}
	ws := s.spec.Workspace.Dir
	dir := filepath.Join(ws, filepath.FromSlash(cwd))
	path := e.Argv[0]
	if !filepath.IsAbs(path) {
		// A program inside the workspace, relative to the cwd.
		path = filepath.Join(dir, path)
		if !strings.HasPrefix(path, ws+string(filepath.Separator)) {
			return nil, job.Errorf(job.CodePathEscape, "program path leaves the workspace").With("argv0", e.Argv[0])
		}
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	stdio, err := backend.NewStdio(e)
	if err != nil {
		s.execs.Done()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: path, Args: e.Argv, Dir: dir,
		Env:   append([]string{}, backend.TerminalEnv(e.Env, e.Terminal)...),
		Stdin: stdio.In, Stdout: stdio.Out, Stderr: stdio.Err,
		// A session of its own: no controlling terminal but the one it
		// is given, so /dev/tty never reaches the operator's terminal;
		// it is also the process group the tree kill signals.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	}
	if e.Terminal != nil || e.TTY {
		cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, 0
	}
	if err := cmd.Start(); err != nil {
		stdio.Abort()
		s.execs.Done()
		return nil, job.Wrap(job.CodeRunSpawnFailed, err, "cannot start process").With("argv0", e.Argv[0])
	}
	stdio.Started()
	s.started(cmd.Process.Pid)
	superviseCtx, stop := context.WithCancel(context.Background())
	p := &process{s: s, cmd: cmd, stdio: stdio, stop: stop, exited: make(chan struct{})}
	go p.watch(superviseCtx, backend.ExecLimits(s.spec.Limits, e), final)
	return p, nil
}

// watch supervises p until it exits, then drains its output and sets
// its outcome.
func (p *process) watch(ctx context.Context, lim backend.Limits, final bool) {
	defer p.s.execs.Done()
	defer close(p.exited)
	defer p.stop()
	pgid := p.cmd.Process.Pid
	reason := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		// Descendants seen at the first stop are remembered, so one whose
		// parent died of the TERM (and which was reparented away) still
		// gets the KILL.
		var tree []int
		reason <- backend.Supervise(ctx, lim, done, func(force bool) {
			sig := unix.SIGTERM
			if force {
				sig = unix.SIGKILL
			}
			tree = append(tree, descendants(pgid)...)
			_ = unix.Kill(-pgid, sig)
			for _, pid := range tree {
				_ = unix.Kill(pid, sig)
			}
		})
	}()
	p.cmd.Wait()
	close(done)
	out := outcome(p.s.spec)
	out.Reason = <-reason
	if final {
		// Anything left in the group (background children) dies with the job.
		_ = unix.Kill(-pgid, unix.SIGKILL)
	}
	p.stdio.Drain(drainWait)
	st := p.cmd.ProcessState
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		out.CPUTime = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		out.PeakMemoryBytes = ru.Maxrss * 1024
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		out.Signal = unix.SignalName(ws.Signal())
		if out.Reason == "" {
			out.Reason = job.ReasonSignal
		}
	default:
		code := st.ExitCode()
		out.ExitCode = &code
		if out.Reason == "" {
			out.Reason = job.ReasonExit
		}
	}
	p.out = out
}

// ID implements backend.Process.
func (p *process) ID() int { return p.cmd.Process.Pid }

// Wait implements backend.Process.
func (p *process) Wait(ctx context.Context) (backend.Outcome, error) {
	stop := context.AfterFunc(ctx, p.stop)
	defer stop()
	<-p.exited
	out := p.out
	out.Enforced, out.NotEnforced = slices.Clone(out.Enforced), slices.Clone(out.NotEnforced)
	return out, nil
}

// Signal implements backend.Process: to the process's group, until
// the process was waited for.
func (p *process) Signal(sig syscall.Signal) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := unix.Kill(-p.cmd.Process.Pid, sig); err != nil && err != unix.ESRCH {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot signal the process")
	}
	return nil
}

// Resize implements backend.Process.
func (p *process) Resize(cols, rows uint16) error { return p.stdio.Resize(cols, rows) }

// CloseStdin implements backend.Process.
func (p *process) CloseStdin() error { return p.stdio.CloseStdin() }
