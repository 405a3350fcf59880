package linuxsandbox

import (
	"context"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Run implements backend.Backend on the sandbox lifecycle: create a
// sandbox for spec (no freezer group: it is never paused), start the
// workload in it as its final exec (its signals reach every process,
// and its exit takes them all down, as pid 1's exit would), wait, and
// delete it. The workload is sent as soon as the init runs, without
// waiting for it to be ready (it is served then); a setup failure comes
// back from the start, coded as Create's. Limits, usage and OOM are the
// sandbox's cgroups', so they cover everything the run did.
func (b *Backend) Run(ctx context.Context, spec backend.Spec) (backend.Outcome, error) {
	s, out, err := b.create(ctx, spec, false, false)
	if err != nil {
		return out, err
	}
	e := backend.Exec{
		Argv: spec.Argv, Env: spec.Env, Cwd: spec.Cwd, TTY: spec.TTY,
		Stdin: spec.Stdin, Stdout: spec.Stdout, Stderr: spec.Stderr,
		Timeout: spec.Limits.Timeout, KillGrace: spec.Limits.KillGrace,
	}
	p, err := s.start(context.WithoutCancel(ctx), e, true)
	if err != nil {
		s.teardown(true)
		return s.outcome(), err
	}
	// Usage samples stop before Run returns.
	var sampling sync.WaitGroup
	if s.in.cg != nil && spec.Usage != nil {
		sampling.Go(func() { s.in.cg.report(spec.Usage, spec.UsageEvery, p.exited) })
	}
	out, err = p.Wait(ctx)
	sampling.Wait()
	if cg := s.in.cg; cg != nil {
		out.PeakMemoryBytes, out.CPUTime = cg.usage()
		if cg.oomKilled() && p.stopReason == "" {
			out.Reason = job.ReasonOOM
		}
	}
	if s.p.disk != nil && err == nil {
		out.Layers, out.Release = s.p.layers, s.p.handDisk()
	}
	s.teardown(true)
	if p.gone {
		// The init itself was killed (OOM of the init, a signal from
		// outside): reported as the workload's end, as its pid 1's.
		return initEnd(out, s.in.cmd, p.stopReason, s.in.cg), nil
	}
	return out, err
}

// initEnd is the outcome of a run whose init died: the signal that
// killed it, and the reason.
func initEnd(out backend.Outcome, cmd *exec.Cmd, stopReason string, cg *cgroup) backend.Outcome {
	out.ExitCode = nil
	if st := cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.Signal = unix.SignalName(ws.Signal())
		}
	}
	out.Reason = stopReason
	switch {
	case out.Reason != "":
	case cg != nil && cg.oomKilled():
		out.Reason = job.ReasonOOM
	default:
		out.Reason = job.ReasonSignal
	}
	return out
}
