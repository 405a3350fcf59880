package oci

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// A process is one `exec` of the runtime, in a process group of its own
// on the host: runc hands it the stdio it was given and the workload
// stays in that group (a signal to the group reaches runc, which passes
// it on, and the workload's tree); runsc's client forwards signals, and
// a stop is also sent to the workload's pid in gVisor (`runsc kill
// --pid`). The runtime exits with the workload's status, a signal n as
// 128+n, which is how it is read back (an `exit 137` reads as SIGKILL).

// drainWait bounds how long output pipes may stay open after the
// process ended.
const drainWait = 2 * time.Second

// Start implements backend.Sandbox.
func (s *Sandbox) Start(ctx context.Context, e backend.Exec) (backend.Process, error) {
	p, err := s.start(ctx, e)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Exec implements backend.Sandbox.
func (s *Sandbox) Exec(ctx context.Context, e backend.Exec) (backend.Outcome, error) {
	p, err := s.start(ctx, e)
	if err != nil {
		return s.outcome(), err
	}
	return p.Wait(ctx)
}

type process struct {
	s     *Sandbox
	cmd   *exec.Cmd
	stdio *backend.Stdio
	stop  context.CancelFunc
	// pid is the workload's pid in the sandbox, hostPid on the host (0
	// under runsc, where it has none).
	pid, hostPid int
	ooms         int64
	mu           sync.Mutex
	tree         []int
	exited       chan struct{}
	out          backend.Outcome
}

var _ backend.Process = (*process)(nil)

func (s *Sandbox) start(ctx context.Context, e backend.Exec) (*process, error) {
	if len(e.Argv) == 0 {
		return nil, job.Errorf(job.CodeRunSpawnFailed, "no program to run")
	}
	cwd, err := backend.ExecCwd(e)
	if err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	n := s.n
	s.mu.Unlock()
	fail := func(err error, msg string) (*process, error) {
		s.execs.Done()
		return nil, job.Wrap(job.CodeRunSpawnFailed, err, msg).With("argv0", e.Argv[0])
	}
	env := backend.TerminalEnv(e.Env, e.Terminal)
	if s.egress != nil {
		env = egressEnv(env, s.spec.Egress.CABundle != "")
	}
	procFile := filepath.Join(s.dir, "exec-"+strconv.Itoa(n)+".json")
	if err := writeJSON(procFile, processConfig(s.spec, e.Argv, env, cwd)); err != nil {
		return fail(err, "cannot write the process's config")
	}
	pidFile := filepath.Join(s.dir, "exec-"+strconv.Itoa(n)+".pid")
	args := []string{"exec", "--process", procFile, "--pid-file", pidFile}
	if s.rt == RuntimeRunsc {
		args = append(args, "--internal-pid-file", pidFile+".internal")
	}
	owner := 0
	if s.slot != nil {
		owner = s.slot.base
	}
	pts := "/dev/pts"
	if s.rt == RuntimeRunc {
		// The sandbox's own devpts, so the process finds its terminal.
		pts = fmt.Sprintf("/proc/%d/root/dev/pts", s.pid)
	}
	stdio, err := backend.NewStdioOn(e, pts, owner)
	if err != nil {
		s.execs.Done()
		return nil, err
	}
	cmd := s.command(append(args, s.id)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.In, stdio.Out, stdio.Err
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	ooms := oomKills(s.cgroup)
	if err := cmd.Start(); err != nil {
		stdio.Abort()
		return fail(err, "cannot start the runtime")
	}
	stdio.Started()
	superviseCtx, stop := context.WithCancel(context.Background())
	p := &process{s: s, cmd: cmd, stdio: stdio, stop: stop, ooms: ooms, exited: make(chan struct{})}
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waited)
	}()
	p.readPids(pidFile, waited)
	if p.pid == 0 && (s.rt == RuntimeRunc || runscFailed(cmd)) {
		// The runtime ended before the workload ran: it could not be
		// executed (the runtime said why on the process's stderr).
		<-waited
		stop()
		stdio.Drain(drainWait)
		s.execs.Done()
		return nil, job.Errorf(job.CodeRunSpawnFailed, "the runtime could not start the program").With("argv0", e.Argv[0])
	}
	go p.watch(superviseCtx, backend.ExecLimits(s.spec.Limits, e), waited)
	return p, nil
}

// readPids waits for the runtime to name the workload's pids (or to
// end: the program could not be started).
func (p *process) readPids(pidFile string, waited <-chan struct{}) {
	for ended := false; ; {
		if pid, err := readPid(pidFile); err == nil {
			p.hostPid, p.pid = pid, pid
			if p.s.rt == RuntimeRunsc {
				p.hostPid = 0
				for range 200 {
					if ipid, err := readPid(pidFile + ".internal"); err == nil {
						p.pid = ipid
						break
					}
					time.Sleep(time.Millisecond)
				}
			} else if ns := nsPid(pid); ns > 0 {
				p.pid = ns
			}
			return
		}
		if ended {
			return
		}
		select {
		case <-waited:
			ended = true // one more look: the file outlives the runtime
		case <-time.After(time.Millisecond):
		}
	}
}

// nsPid is host pid's pid in its own (innermost) pid namespace.
func nsPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[len(f)-1])
				return n
			}
		}
	}
	return 0
}

// signal sends sig to the process: the runtime's host group, the
// workload's group and every descendant of it seen by this or an
// earlier stop (one reparented away after a TERM still gets the KILL).
// Under runsc it is the workload's pid in gVisor (`runsc kill --pid`),
// and with a KILL the client too.
func (p *process) signal(sig unix.Signal) {
	if p.s.rt == RuntimeRunsc {
		// The client forwards nothing reliably: the sentry signals.
		if p.pid > 0 {
			_ = p.s.runtime(context.Background(), "kill", "--pid", strconv.Itoa(p.pid), p.s.id, strconv.Itoa(int(sig)))
		}
		if sig == unix.SIGKILL {
			_ = unix.Kill(-p.cmd.Process.Pid, sig)
		}
		return
	}
	_ = unix.Kill(-p.cmd.Process.Pid, sig)
	if p.hostPid > 0 {
		p.mu.Lock()
		p.tree = append(p.tree, descendants(p.hostPid)...)
		tree := slices.Clone(p.tree)
		p.mu.Unlock()
		_ = unix.Kill(-p.hostPid, sig)
		_ = unix.Kill(p.hostPid, sig)
		for _, pid := range tree {
			_ = unix.Kill(pid, sig)
		}
	}
}

// watch supervises p until the runtime exits, then drains the output
// and sets the outcome.
func (p *process) watch(ctx context.Context, lim backend.Limits, waited <-chan struct{}) {
	defer p.s.execs.Done()
	defer close(p.exited)
	defer p.stop()
	reason := make(chan string, 1)
	go func() {
		reason <- backend.Supervise(ctx, lim, waited, func(force bool) {
			if force {
				p.signal(unix.SIGKILL)
			} else {
				p.signal(unix.SIGTERM)
			}
		})
	}()
	<-waited
	out := p.s.outcome()
	out.Reason = <-reason
	p.stdio.Drain(drainWait)
	st := p.cmd.ProcessState
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		out.CPUTime = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	sig := syscall.Signal(0)
	code := st.ExitCode()
	switch {
	case ws.Signaled():
		sig = ws.Signal()
	case code > 128 && code < 128+65:
		sig = syscall.Signal(code - 128)
	case code == 128 && p.s.rt == RuntimeRunsc && p.s.live() != nil:
		// runsc's client fails so when Delete took the sandbox away.
		sig = syscall.SIGKILL
	}
	if sig != 0 {
		out.Signal = unix.SignalName(sig)
		if out.Reason == "" {
			out.Reason = job.ReasonSignal
			if sig == syscall.SIGKILL && oomKills(p.s.cgroup) > p.ooms {
				out.Reason = job.ReasonOOM
			}
		}
	} else {
		out.ExitCode = &code
		if out.Reason == "" {
			out.Reason = job.ReasonExit
		}
	}
	p.out = out
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
	return out, nil
}

// Signal implements backend.Process.
func (p *process) Signal(sig syscall.Signal) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	p.signal(sig)
	return nil
}

// Resize implements backend.Process.
func (p *process) Resize(cols, rows uint16) error { return p.stdio.Resize(cols, rows) }

// CloseStdin implements backend.Process.
func (p *process) CloseStdin() error { return p.stdio.CloseStdin() }

// descendants lists every process under pid, from /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], n)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		c := children[queue[0]]
		queue = queue[1:]
		out = append(out, c...)
		queue = append(queue, c...)
	}
	return out
}

// runscFailed reports whether a runsc client that wrote no pid ended in
// its own failure (status 128: it could not execute the program).
func runscFailed(cmd *exec.Cmd) bool {
	return cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 128
}
