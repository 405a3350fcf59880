package session

import (
	"time"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/policy"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/validation"
)

// admit checks req against the operator's settings and returns the
// sandbox's first record (starting), the spec to open it with (its
// workspace and egress bridge still to set) and an allowlist's rules.
func (s *Service) admit(req CreateRequest) (Record, runner.SandboxSpec, []egress.Rule, error) {
	var spec runner.SandboxSpec
	if req.ID == "" {
		req.ID = newID()
	} else if !store.ValidID(req.ID) {
		return Record{}, spec, nil, job.Errorf(job.CodeInvalidRequest, "id %q is not a valid id (^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$)", req.ID).With("field", "id")
	}
	kind := validation.NormalizeKind(req.Backend)
	if kind == "" {
		kind = s.cfg.DefaultBackend
	}
	b, ok := s.cfg.Backends[kind]
	if !ok {
		return Record{}, spec, nil, job.Errorf(job.CodeInvalidRequest, "backend %q is not enabled on this server", kind).With("field", "backend").With("enabled", s.cfg.Backends.Kinds())
	}
	if !s.isolating[kind] && !s.cfg.UnsafeLocalProcess {
		return Record{}, spec, nil, job.Errorf(job.CodeInvalidRequest, "backend %q does not isolate; the operator must pass --unsafe-local-process", kind).With("field", "backend")
	}
	if req.Image != "" {
		// Resolved when the sandbox is opened (runner.OpenSandbox);
		// here only whether it can run at all.
		if s.cfg.Runner.Config().Images == nil {
			return Record{}, spec, nil, job.Errorf(job.CodeInvalidRequest, "image %q: this server has no image store, so it runs no images", req.Image).With("field", "image")
		}
		if !b.Capabilities().Images {
			return Record{}, spec, nil, job.Errorf(job.CodeInvalidRequest, "image %q: backend %s cannot run images (linux_sandbox run as root can)", req.Image, kind).With("field", "image").With("backend", kind)
		}
	}
	limits, err := s.limits(req.Limits)
	if err != nil {
		return Record{}, spec, nil, err
	}
	network, rules, err := s.network(req.Network)
	if err != nil {
		return Record{}, spec, nil, err
	}
	if err := CheckPolicy(req.Policy); err != nil {
		return Record{}, spec, nil, err
	}
	if err := s.checkEnv(req.Env, req.Secrets, req.Policy); err != nil {
		return Record{}, spec, nil, err
	}
	if err := s.checkSecrets(req.Secrets, req.Env, network); err != nil {
		return Record{}, spec, nil, err
	}
	timeout := req.TimeoutS
	switch {
	case timeout < 0:
		return Record{}, spec, nil, job.Errorf(job.CodeInvalidRequest, "timeout_s must be positive").With("field", "timeout_s")
	case timeout == 0:
		timeout = int64(s.cfg.DefaultTimeout / time.Second)
	case timeout > int64(s.cfg.MaxTimeout/time.Second):
		return Record{}, spec, nil, job.Errorf(job.CodeLimitExceeded, "timeout_s exceeds the server maximum").With("field", "timeout_s").With("max", int64(s.cfg.MaxTimeout/time.Second)).With("value", timeout)
	}
	idle, err := s.idleTimeout(req)
	if err != nil {
		return Record{}, spec, nil, err
	}
	atTimeout, err := onTimeout(req)
	if err != nil {
		return Record{}, spec, nil, err
	}
	ws, err := s.repository(req.Workspace)
	if err != nil {
		return Record{}, spec, nil, err
	}
	if req.Workspace != nil && req.Workspace.Path != "" {
		if s.cfg.Roots == nil {
			return Record{}, spec, nil, job.Errorf(job.CodePathEscape, "this server takes no workspace.path").With("field", "workspace.path")
		}
		real, err := s.cfg.Roots.Check(req.Workspace.Path)
		if err != nil {
			return Record{}, spec, nil, err
		}
		ws.Path = real
	}
	now := s.now()
	rec := Record{
		ID: req.ID, State: StateStarting, Backend: kind, CreatedAt: now, UpdatedAt: now,
		ExpiresAt: expiry(now, timeout), TimeoutS: timeout, Workspace: ws, Network: network,
		Limits: Limits{MemoryMB: limits.MemoryMB, CPUCount: limits.CPUCount, MaxProcesses: limits.MaxProcesses, TmpMB: limits.TmpMB},
		Policy: req.Policy, Metadata: req.Metadata, Image: req.Image, IdleTimeoutS: idle, AutoPause: req.AutoPause, Env: req.Env, Secrets: req.Secrets,
		OnTimeout: atTimeout, AutoResume: req.AutoResume,
	}
	spec = runner.SandboxSpec{ID: req.ID, Backend: b, Image: req.Image, Network: network.Mode, AllowedHosts: network.AllowedHosts, Limits: limits,
		DeniedPrograms: s.deniedPrograms(req.Policy)}
	return rec, spec, rules, nil
}

// deniedPrograms are the programs no process of a sandbox may execute:
// the shells, when its policy (own, else the operator's) has allow_shell
// false. The kernel holds it for every process (Landlock), and each exec's
// decision then asks for what the sandbox already denies (runner.Step).
func (s *Service) deniedPrograms(own *job.Policy) []string {
	p := own
	if p == nil {
		p = s.cfg.Policy
	}
	if p == nil || p.AllowShell {
		return nil
	}
	return policy.ShellPrograms()
}

// limits holds a sandbox's limits to the operator's maxima and fills
// the rest from the defaults, as a job's (package validation).
func (s *Service) limits(l Limits) (job.Limits, error) {
	req := job.Request{
		Workspace: job.Workspace{Path: "/"}, Command: job.Command{Argv: []string{"true"}},
		Limits: job.Limits{MemoryMB: l.MemoryMB, CPUCount: l.CPUCount, MaxProcesses: l.MaxProcesses, TmpMB: l.TmpMB},
	}
	kinds := func(string) bool { return true }
	err := validation.Request(&req, validation.Config{Defaults: s.cfg.Defaults, Max: s.cfg.Max, DefaultBackend: "session", KnownBackend: kinds})
	if err != nil {
		return job.Limits{}, err
	}
	lim := req.Limits
	return job.Limits{MemoryMB: lim.MemoryMB, CPUCount: lim.CPUCount, MaxProcesses: lim.MaxProcesses, TmpMB: lim.TmpMB}, nil
}

// CheckPolicy refuses a sandbox policy (a create's, or the operator's
// session policy) the run service cannot hold at every exec of a shared
// sandbox: allowed_commands, allowed_env and allow_shell are taken
// (allow_shell false denies the shells to every process of the sandbox,
// as for a job: deniedPrograms). exec_scope every_process, an allow-list
// of the whole sandbox's programs, is not offered for kept sandboxes yet.
func CheckPolicy(p *job.Policy) error {
	if p == nil {
		return nil
	}
	bad := func(field, why string) error {
		return job.Errorf(job.CodeInvalidRequest, "policy.%s: %s", field, why).With("field", "policy."+field)
	}
	switch {
	case p.ExecScope != "" && p.ExecScope != job.ExecScopeArgv0:
		return bad("exec_scope", "kept sandboxes check argv only (argv0)")
	case p.Network != "" || len(p.AllowedHosts) > 0:
		return bad("network", "a sandbox's network is its network field")
	case p.WritePolicy != "" || len(p.ArtifactGlobs) > 0 || len(p.ArtifactDenyGlobs) > 0:
		return bad("artifact_globs", "execs in a sandbox collect no artifacts")
	}
	return nil
}
