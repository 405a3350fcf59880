package runner

import (
	"context"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/validation"
)

// SandboxSpec is a sandbox a caller holds across runs (a task's steps):
// what every process of it shares. What each process brings (argv, env,
// cwd, timeout, input and output) is its run's request and Step.
type SandboxSpec struct {
	// ID names the sandbox (a task's: StepID(task_id, "sandbox")) and is
	// recorded as the result's sandbox by every run in it.
	ID string
	// Backend builds the sandbox; it must keep sandboxes
	// (backend.Sandboxes).
	Backend backend.Backend
	// Workspace is the host directory every run works in, in place (a
	// task's inbox): no snapshot is taken.
	Workspace string
	// ReadOnly and Writable are extra host directories visible at their
	// own paths, read-only and writable (as Options.ReadOnly, Writable).
	ReadOnly []string
	Writable []string
	// Network is the sandbox's network (job.Network*; empty: disabled),
	// AllowedHosts its allowlist, and Egress the caller's bridge an
	// "allowlist" sandbox needs (as Step.Egress: the caller opened it and
	// closes it after Close).
	Network      string
	AllowedHosts []string
	Egress       *backend.Egress
	// Limits are the sandbox's: memory_mb, cpu_count, max_processes and
	// tmp_mb hold for all its processes together (zero: the runner's
	// default, as for a run, so that the request a run in it records
	// says what held); timeout_ms is the timeout of a run whose request
	// sets none.
	Limits job.Limits
	// Image, when set, names the image the sandbox's root is made of
	// (resolved through Config.Images and held until Close); its
	// backend must run images (backend.Capabilities.Images).
	Image string
	// DeniedPrograms, when non-nil, are programs no process of the
	// sandbox may execute (backend.Spec.DeniedPrograms): policy.allow_shell
	// false for the whole sandbox, policy.ShellPrograms(). A run whose
	// policy denies shells may then run in it (see Step).
	DeniedPrograms []string
}

// Sandbox is a live sandbox of the run service: a run is one process of
// it when its Step names it. It is safe for concurrent use; Close
// deletes it.
type Sandbox struct {
	// mu guards spec's ID, which Rebind may change.
	mu   sync.Mutex
	spec SandboxSpec
	b    backend.Backend
	sb   backend.Sandbox
	// caps are b's capabilities, asked at the sandbox's first run and
	// kept: they hold for its life (its cgroups, network and confinement
	// were set up when it was opened), and linux_sandbox probes its
	// cgroups each time it is asked (about 30 system calls).
	capsOnce sync.Once
	caps     backend.Capabilities
	once     sync.Once
	err      error
	// img is the resolved Image; releaseImage lets the store have it
	// back once the sandbox is deleted.
	img          *backend.Image
	releaseImage func()
}

// OpenSandbox creates the sandbox spec describes on spec.Backend. Its
// processes are confined as a one-shot run's are, without an exec
// allow-list, and without denied programs unless spec.DeniedPrograms
// names them (policy.exec_scope every_process and allow_shell false hold
// for a whole sandbox, so a run that asks for more than the sandbox
// denies is refused in a shared one: see Step). The error is coded as a
// run's: backend.unavailable for a backend that keeps no sandboxes or
// is not available, backend.setup_failed when the sandbox cannot be
// built.
func (r *Runner) OpenSandbox(ctx context.Context, spec SandboxSpec) (*Sandbox, error) {
	if spec.Backend == nil {
		return nil, job.Errorf(job.CodeInvalidRequest, "a sandbox needs its backend")
	}
	sbs, ok := spec.Backend.(backend.Sandboxes)
	if !ok {
		return nil, job.Errorf(job.CodeBackendUnavail, "backend keeps no sandboxes").With("backend", spec.Backend.Kind())
	}
	if spec.Network == "" {
		spec.Network = job.NetworkDisabled
	}
	if spec.Network == job.NetworkAllowlist && spec.Egress == nil {
		return nil, job.Errorf(job.CodeBackendSetupFailed, "network allowlist needs the caller's egress bridge")
	}
	if err := spec.Backend.Available(ctx); err != nil {
		return nil, job.Wrap(job.CodeBackendUnavail, err, "backend is unavailable").With("backend", spec.Backend.Kind()).With("reason", err.Error())
	}
	if err := r.checkImage(spec.Image, spec.Backend, "image"); err != nil {
		return nil, err
	}
	img, releaseImage := (*backend.Image)(nil), func() {}
	if spec.Image != "" {
		var err error
		if img, releaseImage, err = r.resolveImage(spec.Image); err != nil {
			return nil, err
		}
	}
	spec.Limits = r.sandboxLimits(spec.Limits)
	l := spec.Limits
	sb, err := sbs.Create(ctx, backend.Spec{
		Image:     img,
		JobID:     spec.ID,
		Workspace: backend.Workspace{Dir: spec.Workspace},
		Cwd:       ".",
		ReadOnly:  spec.ReadOnly,
		Writable:  spec.Writable,
		Network:   spec.Network,
		Egress:    spec.Egress,
		// The programs every process of the sandbox is denied.
		DeniedPrograms: spec.DeniedPrograms,
		Limits: backend.Limits{
			Timeout:      time.Duration(l.TimeoutMS) * time.Millisecond,
			KillGrace:    r.cfg.KillGrace,
			MemoryBytes:  l.MemoryMB << 20,
			CPUCount:     float64(l.CPUCount),
			MaxProcesses: l.MaxProcesses,
			TmpBytes:     l.TmpMB << 20,
		},
	})
	if err != nil {
		releaseImage()
		return nil, err
	}
	return &Sandbox{spec: spec, b: spec.Backend, sb: sb, img: img, releaseImage: releaseImage}, nil
}

// sandboxLimits fills the zero sandbox-wide limits of l as a run's are
// filled: the runner's defaults, else validation.DefaultLimits (tmp_mb
// validation.DefaultTmpMB of the memory).
func (r *Runner) sandboxLimits(l job.Limits) job.Limits {
	d := r.cfg.Defaults
	for _, f := range []struct{ v, def, fixed *int64 }{
		{&l.MemoryMB, &d.MemoryMB, &validation.DefaultLimits.MemoryMB},
		{&l.CPUCount, &d.CPUCount, &validation.DefaultLimits.CPUCount},
		{&l.MaxProcesses, &d.MaxProcesses, &validation.DefaultLimits.MaxProcesses},
		{&l.TmpMB, &d.TmpMB, &validation.DefaultLimits.TmpMB},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
		if *f.v == 0 {
			*f.v = *f.fixed
		}
	}
	if l.TmpMB == 0 {
		l.TmpMB = validation.DefaultTmpMB(l.MemoryMB)
	}
	return l
}

// ID is the sandbox's id (SandboxSpec.ID).
func (s *Sandbox) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spec.ID
}

// Backend is the backend the sandbox runs on.
func (s *Sandbox) Backend() backend.Backend { return s.b }

// Close deletes the sandbox: every process still in it is killed and
// what it holds is freed. Only the first call acts; every call returns
// its error.
func (s *Sandbox) Close() error {
	s.once.Do(func() {
		s.err = s.sb.Delete(context.Background())
		if s.releaseImage != nil {
			s.releaseImage()
		}
	})
	return s.err
}

// shape puts the sandbox's shared settings into req, so that the
// recorded request says what the run ran in: the workspace, the network
// and its allowlist, and the limits that hold for the whole sandbox. The
// run's timeout stays its own (the sandbox's when it sets none).
func (s *Sandbox) shape(req *job.Request) {
	req.Workspace.Path = s.spec.Workspace
	req.Policy.Network, req.Policy.AllowedHosts = s.spec.Network, s.spec.AllowedHosts
	l := s.spec.Limits
	req.Limits.MemoryMB, req.Limits.CPUCount, req.Limits.MaxProcesses, req.Limits.TmpMB = l.MemoryMB, l.CPUCount, l.MaxProcesses, l.TmpMB
	if req.Limits.TimeoutMS == 0 {
		req.Limits.TimeoutMS = l.TimeoutMS
	}
}
