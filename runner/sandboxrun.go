package runner

import (
	"context"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/policy"
)

// sandbox is the sandbox the execution is a process of (Step.Sandbox),
// or nil for a run in a sandbox of its own.
func (e *execution) sandbox() *Sandbox {
	if st := e.opts.Step; st != nil {
		return st.Sandbox
	}
	return nil
}

// capabilities are b's, the backend the execution runs on: for a step
// in a sandbox, those kept by the sandbox (Sandbox.caps).
func (e *execution) capabilities(b backend.Backend) backend.Capabilities {
	if s := e.sandbox(); s != nil {
		s.capsOnce.Do(func() { s.caps = b.Capabilities() })
		return s.caps
	}
	return b.Capabilities()
}

// execIn runs the decided process in the step's sandbox: Start with the
// request's cwd and timeout, the runner's kill grace and the step's
// input and output, sampling the sandbox's usage for Step.Usage while
// it runs, then Wait. The sandbox-wide settings (view, binds, network,
// egress, limits) are the sandbox's; the decision must not need an exec
// confinement the sandbox lacks (every_process, which only a sandbox of
// the run's own holds; allow_shell false, unless the sandbox denies the
// same programs: SandboxSpec.DeniedPrograms).
func (e *execution) execIn(ctx context.Context, s *Sandbox, dec policy.Decision) (backend.Outcome, error) {
	if dec.Executables != nil || !denies(s.spec.DeniedPrograms, dec.DeniedPrograms) {
		return backend.Outcome{}, job.Errorf(job.CodeBackendUnavail, "policy.exec_scope every_process and allow_shell false confine every process of a sandbox: this run needs a sandbox of its own").
			With("backend", s.b.Kind()).With("sandbox", s.ID())
	}
	e.res.Sandbox = s.ID()
	st := e.opts.Step
	x := backend.Exec{
		Argv:      dec.Argv,
		Env:       append(append([]string{}, dec.Env...), st.Env...),
		Cwd:       e.req.Command.Cwd,
		Timeout:   time.Duration(e.req.Limits.TimeoutMS) * time.Millisecond,
		KillGrace: e.r.cfg.KillGrace,
		Stdin:     st.Stdin,
		Stdout:    e.stdout,
		Stderr:    e.stderr,
	}
	flush := func() {}
	switch {
	case st.Terminal != nil:
		x.Stdin, x.Stdout, x.Stderr, x.TTY = st.Terminal, st.Terminal, st.Terminal, true
	case st.Wrap != nil:
		x.Stdout, x.Stderr = st.Wrap("stdout", e.stdout), st.Wrap("stderr", e.stderr)
		flush = func() { flushAll(x.Stdout, x.Stderr) }
	}
	if st.Pty != nil && st.Terminal == nil {
		t := *st.Pty
		x.Terminal = &t
	}
	p, err := s.sb.Start(ctx, x)
	if err != nil {
		flush()
		return backend.Outcome{}, err
	}
	if st.Started != nil {
		st.Started(e.req.JobID, p)
	}
	done := make(chan struct{})
	var sampling sync.WaitGroup
	if sampler, ok := s.sb.(backend.UsageSampler); ok && st.Usage != nil {
		sampling.Go(func() { sampleUsage(sampler, st.Usage, st.UsageEvery, done) })
	}
	out, err := p.Wait(ctx)
	close(done)
	sampling.Wait()
	flush()
	return out, err
}

// denies reports whether a sandbox denying have denies every program of
// want (nil: none is asked).
func denies(have, want []string) bool {
	if want == nil {
		return true
	}
	if have == nil {
		return false
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// sampleUsage hands fn the sandbox's usage every interval (default 30
// s) until done is closed.
func sampleUsage(s backend.UsageSampler, fn func(backend.Usage), every time.Duration, done <-chan struct{}) {
	if every <= 0 {
		every = 30 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if u, ok := s.SampleUsage(); ok {
				fn(u)
			}
		}
	}
}

// flushAll calls Flush on each writer that has one.
func flushAll(ws ...io.Writer) {
	for _, w := range ws {
		if f, ok := w.(interface{ Flush() }); ok {
			f.Flush()
		}
	}
}
