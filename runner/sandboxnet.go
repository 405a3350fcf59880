package runner

import (
	"context"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
)

// Backend is the instance this runner runs kind on (Config.Backends',
// else the registered default), or backend.unavailable when the runner
// does not run kind: what a caller opening a sandbox (OpenSandbox)
// builds it on.
func (r *Runner) Backend(kind string) (backend.Backend, error) {
	if !r.Enabled(kind) {
		return nil, job.Errorf(job.CodeBackendUnavail, "backend is not enabled on this runner").
			With("backend", kind).With("reason", "not among the runner's enabled backends").With("enabled", r.cfg.Backends.Kinds())
	}
	b, ok := r.backend(kind)
	if !ok {
		return nil, job.Errorf(job.CodeBackendUnavail, "backend is not registered").With("backend", kind)
	}
	return b, nil
}

// SandboxEgress holds the network of a sandbox whose processes run under
// policy p to the operator's settings, as a job's is held (network "host"
// needs Config.AllowHostNetwork; an allowlist must lie within the egress
// ceiling, policy.network_denied otherwise), and for "allowlist" opens a
// bridge of the runner's egress gateway for the sandbox id, each of its
// decisions handed to audit (goroutine-safe; may be nil). It returns the
// bridge (nil for any other mode), for SandboxSpec.Egress, and the
// function that closes it, to call once the sandbox is deleted.
func (r *Runner) SandboxEgress(ctx context.Context, id string, p job.Policy, audit func(egress.Decision)) (*backend.Egress, func(), error) {
	rules, jerr := r.networkRules(p)
	if jerr != nil {
		return nil, nil, jerr
	}
	if p.Network != job.NetworkAllowlist {
		return nil, func() {}, nil
	}
	br, err := r.cfg.Egress.Gateway.Open(ctx, &egress.Run{ID: id, Rules: rules, Audit: audit})
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		if err := br.Close(); err != nil {
			r.log.Warn("cannot remove a sandbox's egress bridge", "sandbox", id, "error", err)
		}
	}
	return &backend.Egress{Socket: br.Socket, CABundle: br.CABundle}, stop, nil
}
