package session

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/policy"
	"github.com/agent-runner/agent-runner/runner"
)

// MaxExecTimeout bounds an exec's timeout_s; DefaultExecTimeout is one
// that sets none.
const (
	MaxExecTimeout     = time.Hour
	DefaultExecTimeout = 2 * time.Minute
)

// ExecRequest is one process to run to its end in a sandbox.
type ExecRequest struct {
	Argv     []string          `json:"argv"`
	Cwd      string            `json:"cwd,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Stdin    string            `json:"stdin,omitempty"`
	TimeoutS int64             `json:"timeout_s,omitempty"`
}

// ExecResult is how an exec ended: the run's status (completed, failed,
// timed_out, policy_denied...), exit code and output (each stream held
// to 1 MiB; Truncated when either lost bytes), and the run id whose
// record (runs/<run_id>/) holds the request, the policy decision and
// the result.
type ExecResult struct {
	RunID      string     `json:"run_id"`
	Status     job.Status `json:"status"`
	ExitCode   *int       `json:"exit_code"`
	Stdout     string     `json:"stdout"`
	Stderr     string     `json:"stderr"`
	Truncated  bool       `json:"truncated"`
	DurationMS int64      `json:"duration_ms"`
	Error      *job.Error `json:"error,omitempty"`
}

// Exec runs req in running sandbox id and waits for it: one recorded run
// of the run service (runner.Step in the sandbox), decided by the
// sandbox's policy, else the operator's session policy, else one that
// allows any program inside the sandbox's view. A paused or ended
// sandbox is session.not_running. A policy denial is a result
// (policy_denied), recorded like any run.
// Its audit line holds argv, cwd and the env's names, never their
// values.
func (s *Service) Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	c := &call{tool: AuditExec, args: map[string]any{"argv": req.Argv}}
	putIf(c.args, "cwd", req.Cwd)
	if keys := envKeys(req.Env); keys != nil {
		c.args["env_keys"] = keys
	}
	var res ExecResult
	err := s.audited(id, c, func() error {
		var err error
		res, err = s.exec(ctx, id, req)
		if err == nil {
			c.result = map[string]any{"run_id": res.RunID, "status": res.Status, "exit_code": res.ExitCode}
			c.refused = res.Error
		}
		return err
	})
	if err != nil {
		return ExecResult{}, err
	}
	return res, nil
}

func (s *Service) exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	if len(req.Argv) == 0 {
		return ExecResult{}, job.Errorf(job.CodeInvalidRequest, "argv must not be empty").With("field", "argv")
	}
	timeout := DefaultExecTimeout
	switch {
	case req.TimeoutS < 0:
		return ExecResult{}, job.Errorf(job.CodeInvalidRequest, "timeout_s must be positive").With("field", "timeout_s")
	case req.TimeoutS > int64(MaxExecTimeout/time.Second):
		return ExecResult{}, job.Errorf(job.CodeLimitExceeded, "timeout_s exceeds the exec maximum").With("field", "timeout_s").With("max", int64(MaxExecTimeout/time.Second))
	case req.TimeoutS > 0:
		timeout = time.Duration(req.TimeoutS) * time.Second
	}
	h, err := s.running(id, StateRunning)
	if err != nil {
		return ExecResult{}, err
	}
	h.rec.Execs++
	n, pol, sb := h.rec.Execs, h.rec.Policy, h.sb
	req.Env = mergeEnv(h.defaultEnv(), req.Env)
	// An exec in flight keeps the sandbox from being idle (counted
	// before the lock goes, so no idle check falls between).
	release := s.hold(h)
	h.mu.Unlock()
	defer release()
	jr := job.Request{
		JobID:   runner.StepID(id, "exec-"+strconv.FormatInt(n, 10)),
		Command: job.Command{Argv: req.Argv, Cwd: req.Cwd, Env: req.Env},
		Policy:  s.execPolicy(pol, req, sb),
		Limits:  job.Limits{TimeoutMS: timeout.Milliseconds()},
		// A sandbox's exec is never run again by a restart.
		OnInterrupt: "fail",
	}
	var pid int
	step := &runner.Step{Sandbox: sb, Stdin: strings.NewReader(req.Stdin), Started: func(runID string, p backend.Process) {
		pid = p.ID()
		s.publishRun(RunEvent{SandboxID: id, RunID: runID, Run: RunExec, PID: pid, Status: job.StatusRunning})
	}}
	res, err := s.cfg.Runner.Step(ctx, jr, runner.Options{Step: step})
	if err != nil {
		return ExecResult{}, err
	}
	s.publishRun(endedRun(id, RunExec, pid, res))
	s.recorded(res.JobID)
	h.mu.Lock()
	if h.rec.State.Live() {
		h.rec.LastRun, h.rec.UpdatedAt = res.JobID, s.now()
		if err := write(s.cfg.Records, h.rec, s.cfg.Durable); err != nil {
			s.cfg.Logger.Warn("cannot record a sandbox's exec", "id", id, "run_id", res.JobID, "error", err)
		}
	}
	h.mu.Unlock()
	return ExecResult{
		RunID: res.JobID, Status: res.Status, ExitCode: res.ExitCode,
		Stdout: res.Stdout.Text, Stderr: res.Stderr.Text, Truncated: res.Stdout.Truncated || res.Stderr.Truncated,
		DurationMS: res.DurationMS, Error: res.Error,
	}, nil
}

// execPolicy is the policy an exec runs under: the sandbox's, else the
// operator's, else the smallest that lets req's program (inside the
// sandbox's view) run with req's env and the shell.
func (s *Service) execPolicy(own *job.Policy, req ExecRequest, sb *runner.Sandbox) job.Policy {
	switch {
	case own != nil:
		return *own
	case s.cfg.Policy != nil:
		return *s.cfg.Policy
	}
	env := make([]string, 0, len(req.Env))
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		env = append(env, k+"="+req.Env[k])
	}
	return policy.Smallest(req.Argv, env, sb.Backend())
}
