package session

import (
	"context"
	"io"
	"strconv"
	"strings"
	"syscall"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// ProcessRequest is a background process to start in a sandbox: argv,
// cwd and env as an exec's; Pty, when set, runs it on a pseudo-terminal
// of that size (0: 80x24); Tag is the caller's label.
type ProcessRequest struct {
	Argv []string          `json:"argv"`
	Cwd  string            `json:"cwd,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	Pty  *PtySize          `json:"pty,omitempty"`
	Tag  string            `json:"tag,omitempty"`
	// NoStdin starts it with no input (/dev/null, as an exec without
	// stdin): WriteStdin is then refused. Without a pty only; not part
	// of the HTTP route (a door that offers it, E2B's, sets it).
	NoStdin bool `json:"-"`
}

// PtySize is a terminal's size in characters.
type PtySize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// maxTagBytes bounds a process's tag.
const maxTagBytes = 256

// StartProcess starts req in running sandbox id and returns once it runs,
// without waiting for it: one run of the run service (runner.Step in the
// sandbox, recorded as runs/<id>.proc-<n>/ when it ends), decided by the
// same policy as an exec. A denial is the policy's error (its run is
// recorded policy_denied); a program that cannot start, run.spawn_failed.
// Its output goes to a buffer of OutputBufferBytes (FollowProcess); it
// runs until it ends, is killed, or its sandbox ends, at most the
// sandbox's longest timeout. MaxProcesses may run at once in a sandbox
// (one more is session.limit_reached).
func (s *Service) StartProcess(ctx context.Context, id string, req ProcessRequest) (ProcessInfo, error) {
	c := &call{tool: AuditProcessStart, args: map[string]any{"argv": req.Argv, "pty": req.Pty != nil}}
	putIf(c.args, "cwd", req.Cwd)
	putIf(c.args, "tag", req.Tag)
	if keys := envKeys(req.Env); keys != nil {
		c.args["env_keys"] = keys
	}
	var info ProcessInfo
	err := s.audited(id, c, func() error {
		var err error
		info, err = s.startProcess(ctx, id, req)
		if err == nil {
			c.result = map[string]any{"pid": info.PID, "run_id": info.RunID}
		} else if runID := job.AsError(err).Details["run_id"]; runID != nil {
			c.result = map[string]any{"run_id": runID}
		}
		return err
	})
	if err != nil {
		return ProcessInfo{}, err
	}
	return info, nil
}

func (s *Service) startProcess(ctx context.Context, id string, req ProcessRequest) (ProcessInfo, error) {
	if len(req.Argv) == 0 {
		return ProcessInfo{}, job.Errorf(job.CodeInvalidRequest, "argv must not be empty").With("field", "argv")
	}
	if len(req.Tag) > maxTagBytes {
		return ProcessInfo{}, job.Errorf(job.CodeInvalidRequest, "tag is longer than %d bytes", maxTagBytes).With("field", "tag")
	}
	h, err := s.running(id, StateRunning)
	if err != nil {
		return ProcessInfo{}, err
	}
	if err := h.procs.begin(); err != nil {
		h.mu.Unlock()
		return ProcessInfo{}, err
	}
	h.rec.Processes++
	n, pol, sb := h.rec.Processes, h.rec.Policy, h.sb
	req.Env = mergeEnv(h.defaultEnv(), req.Env)
	h.mu.Unlock()
	jr := job.Request{
		JobID:       runner.StepID(id, "proc-"+strconv.FormatInt(n, 10)),
		Command:     job.Command{Argv: req.Argv, Cwd: req.Cwd, Env: req.Env},
		Policy:      s.execPolicy(pol, ExecRequest{Argv: req.Argv, Env: req.Env}, sb),
		Limits:      job.Limits{TimeoutMS: s.cfg.MaxTimeout.Milliseconds()},
		OnInterrupt: "fail",
	}
	pr, pw := io.Pipe()
	pctx, cancel := context.WithCancel(context.Background())
	pc := &proc{out: newOutput(OutputBufferBytes), stdin: pw, cancel: cancel, done: make(chan struct{})}
	pc.info = ProcessInfo{Tag: req.Tag, Argv: req.Argv, Pty: req.Pty != nil, State: ProcessRunning}
	step := &runner.Step{
		Sandbox: sb,
		Stdin:   pr,
		Wrap: func(stream string, capture io.Writer) io.Writer {
			return io.MultiWriter(capture, streamWriter{o: pc.out, stream: stream})
		},
	}
	if req.Pty != nil {
		step.Pty = &backend.Terminal{Cols: req.Pty.Cols, Rows: req.Pty.Rows, Term: "xterm"}
	} else if req.NoStdin {
		step.Stdin, pc.stdin = nil, nil
	}
	started := make(chan struct{})
	step.Started = func(runID string, p backend.Process) {
		pc.mu.Lock()
		pc.p, pc.info.PID, pc.info.RunID, pc.info.StartedAt = p, p.ID(), runID, s.now()
		pc.mu.Unlock()
		h.procs.add(pc)
		s.publishRun(RunEvent{SandboxID: id, RunID: runID, Run: RunProcess, PID: p.ID(), Status: job.StatusRunning})
		close(started)
	}
	var res job.Result
	var runErr error
	go func() {
		defer h.procs.all.Done()
		res, runErr = s.cfg.Runner.Step(pctx, jr, runner.Options{Step: step})
		pr.Close()
		cancel()
		// The slot is free before anyone waiting on pc.done (KillProcess,
		// a client) hears that the process ended, so a start right after
		// is not refused session.limit_reached.
		h.procs.release()
		s.finish(h, pc, res, runErr)
		if runErr == nil {
			s.publishRun(endedRun(id, RunProcess, pc.snapshot().PID, res))
			s.recorded(res.JobID)
		}
	}()
	select {
	case <-started:
		return pc.snapshot(), nil
	case <-pc.done:
	case <-ctx.Done():
		cancel()
		<-pc.done
		return ProcessInfo{}, job.Wrap(job.CodeRunCanceled, ctx.Err(), "the caller left before the process started")
	}
	if runErr != nil {
		return ProcessInfo{}, runErr
	}
	if res.Error != nil {
		e := *res.Error
		return ProcessInfo{}, e.With("run_id", res.JobID)
	}
	return ProcessInfo{}, job.Errorf(job.CodeInternal, "the process ended before it started").With("run_id", res.JobID)
}

// finish records how pc ended and completes its output.
func (s *Service) finish(h *handle, pc *proc, res job.Result, err error) {
	pc.mu.Lock()
	now := s.now()
	pc.info.State, pc.info.EndedAt = ProcessExited, &now
	pc.info.Status, pc.info.ExitCode, pc.info.Error = res.Status, res.ExitCode, res.Error
	if err != nil {
		pc.info.Error = job.AsError(err)
	}
	began := pc.p != nil
	pc.mu.Unlock()
	// Its sandbox's idle time starts once its last process ended.
	h.act.touch(now)
	pc.out.close()
	close(pc.done)
	if began {
		h.procs.exited(pc)
	}
}

// process is process pid of sandbox id when the sandbox is in one of
// the states ok (none: any live state): job.not_found when there is no
// such process, session.not_running when the sandbox is in another
// state.
func (s *Service) process(id string, pid int, ok ...State) (*proc, error) {
	if len(ok) == 0 {
		ok = []State{StateRunning, StatePaused, StateStarting}
	}
	h, err := s.running(id, ok...)
	if err != nil {
		return nil, err
	}
	h.mu.Unlock()
	pc := h.procs.get(pid)
	if pc == nil {
		return nil, job.Errorf(job.CodeJobNotFound, "no process %d in sandbox %s", pid, id).With("id", id).With("pid", pid)
	}
	return pc, nil
}

// runningProcess is process pid of running sandbox id when it still
// runs: session.not_running with details.state exited when it ended (or
// the sandbox's state when it is paused: a frozen process takes no
// input and dies of no signal until it is thawed).
func (s *Service) runningProcess(id string, pid int) (*proc, error) {
	pc, err := s.process(id, pid, StateRunning)
	if err != nil {
		return nil, err
	}
	if pc.ended() {
		return nil, job.Errorf(job.CodeSessionNotRunning, "process %d has exited", pid).With("id", id).With("pid", pid).With("state", ProcessExited)
	}
	return pc, nil
}

// Processes lists live sandbox id's background processes, running and
// recently ended (MaxEndedProcesses), oldest first.
func (s *Service) Processes(id string) ([]ProcessInfo, error) {
	h, err := s.running(id, StateRunning, StatePaused, StateStarting)
	if err != nil {
		return nil, err
	}
	h.mu.Unlock()
	return h.procs.list(), nil
}

// Process is one background process of live sandbox id.
func (s *Service) Process(id string, pid int) (ProcessInfo, error) {
	pc, err := s.process(id, pid)
	if err != nil {
		return ProcessInfo{}, err
	}
	return pc.snapshot(), nil
}

// KillProcess stops process pid of running sandbox id (TERM to its
// group, the runner's kill grace, KILL; its run is recorded canceled)
// and returns it once it ended. An ended process is answered as it is.
func (s *Service) KillProcess(ctx context.Context, id string, pid int) (ProcessInfo, error) {
	var info ProcessInfo
	c := &call{tool: AuditProcessKill, args: map[string]any{"pid": pid}}
	err := s.audited(id, c, func() error {
		pc, err := s.process(id, pid, StateRunning)
		if err != nil {
			return err
		}
		pc.cancel()
		select {
		case <-pc.done:
		case <-ctx.Done():
			return job.Wrap(job.CodeRunCanceled, ctx.Err(), "the caller left before the process ended")
		}
		info = pc.snapshot()
		c.result = map[string]any{"run_id": info.RunID, "status": info.Status, "exit_code": info.ExitCode}
		return nil
	})
	if err != nil {
		return ProcessInfo{}, err
	}
	return info, nil
}

// WriteStdin passes data to process pid's standard input (with a pty,
// types it), returning once the process's input took it; eof then ends
// the input (with a pty: ^D).
func (s *Service) WriteStdin(ctx context.Context, id string, pid int, data []byte, eof bool) error {
	pc, err := s.runningProcess(id, pid)
	if err != nil {
		return err
	}
	if pc.stdin == nil {
		return job.Errorf(job.CodeInvalidRequest, "process %d was started without input", pid).With("id", id).With("pid", pid)
	}
	if len(data) > 0 {
		wrote := make(chan error, 1)
		go func() {
			_, err := pc.stdin.Write(data)
			wrote <- err
		}()
		select {
		case err = <-wrote:
		case <-ctx.Done():
			return job.Wrap(job.CodeRunCanceled, ctx.Err(), "the caller left before the process read its input")
		}
		if err != nil {
			return job.Errorf(job.CodeSessionNotRunning, "process %d has exited", pid).With("id", id).With("pid", pid).With("state", ProcessExited)
		}
	}
	if eof {
		if err := pc.p.CloseStdin(); err != nil {
			return job.Wrap(job.CodeInternal, err, "cannot close the process's input")
		}
	}
	return nil
}

// signals are the signals a caller may send, by name.
var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM, "CONT": syscall.SIGCONT,
	"STOP": syscall.SIGSTOP, "WINCH": syscall.SIGWINCH, "ALRM": syscall.SIGALRM,
}

// ParseSignal reads a signal name ("TERM", "SIGTERM", "term"):
// validation.invalid_request for another.
func ParseSignal(name string) (syscall.Signal, error) {
	sig, ok := signals[strings.TrimPrefix(strings.ToUpper(name), "SIG")]
	if !ok {
		return 0, job.Errorf(job.CodeInvalidRequest, "signal %q is not one of HUP INT QUIT KILL USR1 USR2 TERM CONT STOP WINCH ALRM", name).With("field", "signal")
	}
	return sig, nil
}

// SignalProcess sends sig to process pid's group.
func (s *Service) SignalProcess(id string, pid int, sig syscall.Signal) error {
	return s.audited(id, &call{tool: AuditProcessSignal, args: map[string]any{"pid": pid, "signal": signalName(sig)}}, func() error {
		pc, err := s.runningProcess(id, pid)
		if err != nil {
			return err
		}
		if err := pc.p.Signal(sig); err != nil {
			return job.Wrap(job.CodeInternal, err, "cannot signal the process")
		}
		return nil
	})
}

// signalName is sig's name in signals ("TERM"), else its number.
func signalName(sig syscall.Signal) string {
	for name, s := range signals {
		if s == sig {
			return name
		}
	}
	return strconv.Itoa(int(sig))
}

// ResizeProcess sets process pid's terminal size: session.no_terminal
// for a process started without a pty.
func (s *Service) ResizeProcess(id string, pid int, size PtySize) error {
	pc, err := s.runningProcess(id, pid)
	if err != nil {
		return err
	}
	if !pc.info.Pty {
		return job.Errorf(job.CodeSessionNoTerminal, "process %d has no terminal to resize", pid).With("id", id).With("pid", pid)
	}
	if size.Cols == 0 || size.Rows == 0 {
		return job.Errorf(job.CodeInvalidRequest, "cols and rows must be positive").With("field", "cols")
	}
	if err := pc.p.Resize(size.Cols, size.Rows); err != nil {
		return job.Wrap(job.CodeInternal, err, "cannot resize the terminal")
	}
	return nil
}
