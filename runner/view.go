package runner

import (
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/policy"
)

// policyConfig is the policy configuration of a job on backend kind: the
// runner's, with the backend's view when it has one (backend.Viewer), so
// that a bare program name resolves on the sandbox's PATH to a program
// the sandbox can see, never on the runner's own search path.
func (r *Runner) policyConfig(kind string) policy.Config {
	b, _ := r.backend(kind)
	return r.policyConfigOn(b)
}

// policyConfig is the policy configuration of the execution: on its
// step's backend, else on the request's kind.
func (e *execution) policyConfig() policy.Config {
	if img := e.image(); img != nil {
		// Programs are the image's, resolved inside it.
		cfg := e.r.cfg.Policy
		view := backend.ImageView(*img)
		cfg.View = &view
		return cfg
	}
	if st := e.opts.Step; st != nil {
		return e.r.policyConfigOn(st.Backend)
	}
	return e.r.policyConfig(e.req.Backend.Kind)
}

// policyConfigOn is the runner's policy configuration with b's view
// (nil b: none).
func (r *Runner) policyConfigOn(b backend.Backend) policy.Config {
	cfg := r.cfg.Policy
	if v, ok := b.(backend.Viewer); ok {
		view := v.View()
		cfg.View = &view
	}
	return cfg
}
