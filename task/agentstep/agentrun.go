// Package agentstep runs a task's agent (Claude Code by default, or the
// manifest's agent.command) as a step of the run service (runner.Step:
// policy decided and recorded, output captured and hashed, a run record
// runs/<task_id>.agent) on the task's backend over the staged inbox, in
// the task's sandbox (OpenSandbox) or one of its own: output goes to the
// progress logs and live subscribers with secret
// values scrubbed, stream-json lines update progress (bytes, tool calls,
// current tool, last activity), and a task timeout and a hang timeout (no
// output for a while) end the run with the reason recorded.
package agentstep

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
)

// End reasons beyond the backend's (exit, signal, timeout, oom, canceled).
const ReasonHang = "hang"

// Config configures a run.
type Config struct {
	Backend backend.Backend
	// HangTimeout ends a run whose agent printed nothing for this long
	// (default 30 min, seed 004).
	HangTimeout time.Duration
	// Sandbox, when set, is the task's sandbox (OpenSandbox): the agent
	// runs in it as one of its processes, and Network, Egress and Mounts
	// are the ones it was opened with. Nil: a sandbox of the agent's own.
	Sandbox *runner.Sandbox
	// Network is the run's network mode (job.Network*, decided by the
	// lifecycle from vm.network_mode and the operator's settings; default
	// disabled) and Egress the gateway bridge an allowlist run needs.
	Network string
	Egress  *backend.Egress
	// Output, when set, receives every scrubbed chunk ("stdout"/"stderr"),
	// one call at a time per stream, and each heartbeat line ("metrics",
	// as appended to metrics.jsonl).
	Output func(stream string, p []byte)
	// Env adds variables that are not secrets (not scrubbed); Mounts are
	// host directories made visible read-only at the same path (the
	// children socket's directory).
	Env    []string
	Mounts []string
	// HeartbeatEvery is how often a heartbeat (progress, CPU, memory) is
	// appended to outbox/progress/metrics.jsonl (default 30 s, seed 004).
	HeartbeatEvery time.Duration
	// Logger hears what no record of the task holds: a progress log or
	// metrics.jsonl that could not be written, once each. It should carry
	// the task's id (the lifecycle's does); nil discards.
	Logger *slog.Logger
	// Runner is the run service the agent runs through, recorded as
	// runs/<task_id>.agent (runner.StepID); nil: the task's own step
	// store (stage.StepRunner).
	Runner *runner.Runner
	// Policy is the operator's policy for tasks (serve's --task-policy);
	// nil: policy.Smallest. See StepPolicy.
	Policy *job.Policy
	// MaxLogBytes caps each of stdout.log and stderr.log (default
	// DefaultMaxLogBytes): past it the log ends with a truncation line and
	// the rest of the output reaches live subscribers only.
	MaxLogBytes int64
}

// StreamMetrics is the Output stream of heartbeat lines.
const StreamMetrics = "metrics"

// DefaultMaxLogBytes is the default cap of each progress log.
const DefaultMaxLogBytes = 256 << 20

// Outcome is how the agent run ended.
type Outcome struct {
	ExitCode *int          `json:"exit_code,omitempty"`
	Reason   string        `json:"reason"`
	Signal   string        `json:"signal,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	Progress Progress      `json:"progress"`
	Backend  string        `json:"backend"`
	// CPUTime and PeakMemoryBytes are the whole run's, where the backend
	// measures them (cgroups); zero otherwise.
	CPUTime         time.Duration `json:"cpu_time_ns,omitempty"`
	PeakMemoryBytes int64         `json:"peak_memory_bytes,omitempty"`
	// Enforced and NotEnforced are the backend's report (job.Limit*).
	Enforced    []string `json:"enforced,omitempty"`
	NotEnforced []string `json:"not_enforced,omitempty"`
	// Failure, for a run that did not exit 0, is the agent's own account
	// of why: the stream-json result's error, else the last error line of
	// its stderr (else its last line); scrubbed, at most MaxFailureBytes.
	Failure string `json:"failure,omitempty"`
	// RunID is the run record of the agent step (runs/<RunID>), once
	// the run service has claimed one.
	RunID string `json:"run_id,omitempty"`
}

// Command is the argv the task runs: agent.command, or Claude Code.
//
// Claude Code's --allowedTools is variadic: given as `--allowedTools T`,
// it goes on taking the arguments after T, the prompt included (2.1.x then
// exits 1: "Input must be provided"). Each tool is therefore one argument
// `--allowedTools=T`, which ends the option there (the CLI joins repeated
// ones), and `--` comes before the prompt, so that nothing in it (a prompt
// starting with "-") is read as an option.
func Command(t *manifest.Task) []string {
	if t.Agent != nil && len(t.Agent.Command) > 0 {
		return t.Agent.Command
	}
	argv := []string{"claude", "--print", "--verbose", "--output-format", t.Claude.OutputFormat, "--model", t.Claude.Model}
	if t.Claude.MaxTurns > 0 {
		argv = append(argv, "--max-turns", strconv.Itoa(t.Claude.MaxTurns))
	}
	if t.Claude.SkipPermissions == nil || *t.Claude.SkipPermissions {
		argv = append(argv, "--dangerously-skip-permissions")
	}
	for _, tool := range t.Claude.AllowedTools {
		argv = append(argv, "--allowedTools="+tool)
	}
	return append(argv, "--", t.Claude.Prompt)
}

// Run runs the agent to completion. secrets maps env names to values; the
// values are injected into the sandbox environment and scrubbed from all
// captured output.
func Run(ctx context.Context, l stage.Layout, t *manifest.Task, secrets map[string]string, cfg Config) (Outcome, error) {
	out := Outcome{Backend: cfg.Backend.Kind()}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	network := cfg.Network
	if network == "" {
		network = job.NetworkDisabled
	}
	if network == job.NetworkAllowlist && cfg.Egress == nil {
		return out, job.Errorf(job.CodeBackendSetupFailed, "vm.network_mode %s needs an egress gateway for the run", t.VM.NetworkMode)
	}
	argv := Command(t)
	exe, err := resolveAgent(cfg.Backend, t)
	if err != nil {
		return out, err
	}
	home, err := PrepareHome(l, cfg.Backend)
	if err != nil {
		return out, err
	}
	env := append(BaseEnv(t, home, cfg.Backend), cfg.Env...)
	req := agentRequest(l, t, append([]string{exe}, argv[1:]...), env, network, cfg)
	var values, secretEnv []string
	for k, v := range secrets {
		values = append(values, v)
		secretEnv = append(secretEnv, k+"="+v)
	}
	steps, closeSteps, err := stage.StepRunner(cfg.Runner, l)
	if err != nil {
		return out, err
	}
	defer func() {
		if err := closeSteps(); err != nil {
			log.Warn("cannot close the task's step store", "error", err)
		}
	}()
	scrub := newScrubber(values)
	if cfg.HangTimeout <= 0 {
		cfg.HangTimeout = 30 * time.Minute
	}
	if emit := cfg.Output; emit != nil {
		// stdout and stderr are copied concurrently; subscribers see one
		// chunk at a time.
		var emitMu sync.Mutex
		cfg.Output = func(stream string, p []byte) {
			emitMu.Lock()
			defer emitMu.Unlock()
			emit(stream, p)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	prog := &tracker{scrub: scrub}
	var hung bool
	var mu sync.Mutex
	watch := time.NewTicker(min(cfg.HangTimeout/4, time.Second))
	defer watch.Stop()
	go func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-watch.C:
				if time.Since(prog.last()) > cfg.HangTimeout {
					mu.Lock()
					hung = true
					mu.Unlock()
					cancel()
					return
				}
			}
		}
	}()
	// The logs and live subscribers get scrubbed output; progress and the
	// failure line read the raw streams (see tracker) and scrub what they
	// keep.
	if cfg.MaxLogBytes <= 0 {
		cfg.MaxLogBytes = DefaultMaxLogBytes
	}
	emitStdout, emitStderr := func([]byte) {}, func([]byte) {}
	if cfg.Output != nil {
		emitStdout = func(p []byte) { cfg.Output("stdout", p) }
		emitStderr = func(p []byte) { cfg.Output("stderr", p) }
	}
	stdout, err := newLog(filepath.Join(l.Progress(), "stdout.log"), scrub, cfg.MaxLogBytes, emitStdout)
	if err != nil {
		return out, err
	}
	defer closeLog(stdout, "stdout.log", log)
	stderr, err := newLog(filepath.Join(l.Progress(), "stderr.log"), scrub, cfg.MaxLogBytes, emitStderr)
	if err != nil {
		return out, err
	}
	defer closeLog(stderr, "stderr.log", log)
	errLine := &errorLine{}
	prog.touch(0)
	if cfg.HeartbeatEvery <= 0 {
		cfg.HeartbeatEvery = 30 * time.Second
	}
	hb := &heartbeats{path: filepath.Join(l.Progress(), HeartbeatFile), taskID: t.Metadata.ID, prog: prog, log: log}
	if cfg.Output != nil {
		hb.emit = func(p []byte) { cfg.Output(StreamMetrics, p) }
	}
	beating := make(chan struct{})
	var beats sync.WaitGroup
	beats.Go(func() { hb.run(cfg.HeartbeatEvery, beating) })
	// The backend's output is read raw for progress and the failure
	// line, then scrubbed into the progress logs, whose output goes on
	// to the run's capture and live subscribers.
	wrap := func(stream string, capture io.Writer) io.Writer {
		if stream == "stdout" {
			stdout.setEmit(tee(capture, emitStdout))
			return flushWriter{log: stdout, observe: prog.add}
		}
		stderr.setEmit(tee(capture, emitStderr))
		return flushWriter{log: stderr, observe: func(p []byte) { prog.touch(len(p)); errLine.Write(p) }}
	}
	start := time.Now()
	res, err := steps.Step(runCtx, req, runner.Options{
		ReadOnly: cfg.Mounts,
		Step: &runner.Step{Backend: cfg.Backend, Sandbox: cfg.Sandbox, Env: secretEnv, Egress: cfg.Egress, Wrap: wrap,
			Usage: hb.sample, UsageEvery: min(cfg.HeartbeatEvery, 5*time.Second)},
	})
	stdout.Flush()
	stderr.Flush()
	prog.end()
	if err == nil && res.Termination == nil {
		// Refused before the agent started (policy, backend setup): the
		// record says why, and so does the task.
		err = job.Errorf(job.CodeBackendSetupFailed, "the agent step ended without running")
		if res.Error != nil {
			err = res.Error
		}
	}
	if err == nil && res.Usage != nil {
		// The last heartbeat carries the run's totals (the process is gone).
		cpu := time.Duration(res.Usage.CPUTimeMS) * time.Millisecond
		hb.sample(backend.Usage{CPUTime: cpu, PeakMemoryBytes: res.Usage.PeakMemoryBytes})
		out.CPUTime, out.PeakMemoryBytes = cpu, res.Usage.PeakMemoryBytes
	}
	close(beating)
	beats.Wait()
	out.RunID = res.JobID
	out.Duration = time.Since(start)
	out.Progress = prog.snapshot()
	if err != nil {
		return out, err
	}
	out.ExitCode, out.Reason, out.Signal = res.ExitCode, res.Termination.Reason, res.Termination.Signal
	if res.Enforcement != nil {
		out.Enforced, out.NotEnforced = res.Enforcement.Enforced, res.Enforcement.NotEnforced
	}
	mu.Lock()
	if hung && out.Reason == job.ReasonCanceled {
		out.Reason = ReasonHang
	}
	mu.Unlock()
	if out.ExitCode == nil || *out.ExitCode != 0 {
		out.Failure = prog.failure()
		if out.Failure == "" {
			out.Failure = errLine.failure(scrub)
		}
	}
	return out, nil
}

// closeLog closes a progress log; the run's outcome does not depend on
// it, an incomplete log is the operator's to know.
func closeLog(l *scrubLog, name string, log *slog.Logger) {
	if err := l.Close(); err != nil {
		log.Error("the task's progress log is incomplete", "file", name, "error", err)
	}
}

// flushWriter is one stream of the agent on its way to the run's
// capture: observe reads the raw bytes, log scrubs them (and emits them
// on); Flush, which the run service calls once the agent has ended,
// writes out what the scrubber held back.
type flushWriter struct {
	log     *scrubLog
	observe func(p []byte)
}

func (w flushWriter) Write(p []byte) (int, error) {
	w.observe(p)
	return w.log.Write(p)
}

func (w flushWriter) Flush() { w.log.Flush() }

// tee hands p to the capture, then to emit.
func tee(capture io.Writer, emit func([]byte)) func([]byte) {
	return func(p []byte) {
		capture.Write(p) // a capture never fails (package capture)
		emit(p)
	}
}
