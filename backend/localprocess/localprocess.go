// Package localprocess is the local_process backend: it execs the argv
// directly (never through a shell) as the runner's user, in its own process
// group, with the empty-by-default environment the pipeline built, inside
// the job's snapshot directory. It enforces the timeout (TERM to the whole
// group, a grace period, then KILL) and cancellation, and nothing else: it
// is a policy and reproducibility boundary, not a sandbox. Its kept
// "sandbox" (sandbox.go) is a workspace directory and its execs' process
// groups, paused with SIGSTOP.
package localprocess

import (
	"context"
	"errors"
	"slices"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Kind is the backend name.
const Kind = "local_process"

func init() {
	backend.RegisterFactory(Kind, func(cfg backend.Config) (backend.Backend, error) { return New(cfg) })
}

// Backend is the local_process backend. The zero value is ready to use.
type Backend struct {
	// requireLimits makes the backend unavailable: it applies no memory,
	// CPU or process limits (backend.Config.RequireLimits).
	requireLimits bool
}

var _ backend.Backend = Backend{}

// New returns a local_process backend. It runs on the whole host, so
// the view fields of cfg (ReadOnly, Path, Masked) do not apply to it;
// with cfg.RequireLimits it is unavailable, as it cannot apply them.
func New(cfg backend.Config) (Backend, error) {
	return Backend{requireLimits: cfg.RequireLimits}, nil
}

// Kind implements backend.Backend.
func (Backend) Kind() string { return Kind }

// Capabilities implements backend.Backend: not isolating.
func (Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Enforces: []string{job.LimitTimeout, job.LimitOutput}}
}

// Available implements backend.Backend: local_process always is, unless
// the operator requires limits it cannot apply.
func (b Backend) Available(context.Context) error {
	if b.requireLimits {
		return errLimits
	}
	return nil
}

var errLimits = errors.New("local_process cannot apply memory, CPU or process limits, and the configuration requires them")

// notEnforced lists what this backend only records.
var notEnforced = []string{job.LimitNetwork, job.LimitMemory, job.LimitCPU, job.LimitProcesses, job.LimitFSWrite, job.LimitFSRead}

// Run implements backend.Backend on the sandbox lifecycle: a sandbox
// of spec, the workload started in it as its final exec (when it exits,
// whatever it left in its group dies with it), Wait, Delete.
func (b Backend) Run(ctx context.Context, spec backend.Spec) (backend.Outcome, error) {
	s, err := b.newSandbox(spec)
	if err != nil {
		return outcome(spec), err
	}
	defer s.Delete(context.Background())
	p, err := s.start(context.WithoutCancel(ctx), backend.Exec{
		Argv: spec.Argv, Env: spec.Env, Cwd: spec.Cwd, TTY: spec.TTY,
		Stdin: spec.Stdin, Stdout: spec.Stdout, Stderr: spec.Stderr,
		Timeout: spec.Limits.Timeout, KillGrace: spec.Limits.KillGrace,
	}, true)
	if err != nil {
		return outcome(spec), err
	}
	return p.Wait(ctx)
}

// outcome is a fresh Outcome for spec with what this backend enforces.
func outcome(spec backend.Spec) backend.Outcome {
	out := backend.Outcome{Enforced: []string{job.LimitTimeout, job.LimitOutput}, NotEnforced: slices.Clone(notEnforced)}
	if spec.Limits.DiskBytes > 0 {
		// Recorded, like memory: the job writes to the runner's disk.
		out.NotEnforced = append(out.NotEnforced, job.LimitDisk)
	}
	return out
}

// check refuses a Spec this backend cannot honour.
func (b Backend) check(spec backend.Spec) error {
	if b.requireLimits {
		return job.Wrap(job.CodeBackendUnavail, errLimits, "local_process is unavailable").With("backend", Kind)
	}
	if spec.Workspace.Overlay() {
		return job.Errorf(job.CodeBackendSetupFailed, "local_process cannot mount an overlay snapshot; use snapshot_strategy copy")
	}
	if len(spec.Binds) > 0 {
		// A symlink would let the workload write through a "read-only"
		// mount, and a cache shared by jobs of the runner's own user is no
		// boundary at all: refuse rather than pretend.
		return job.Errorf(job.CodeBackendSetupFailed, "local_process cannot bind directories (workspace.readonly_mounts, workspace.caches); use linux_sandbox").
			With("binds", len(spec.Binds))
	}
	return nil
}
