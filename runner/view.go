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
	cfg := r.cfg.Policy
	if b, ok := r.backend(kind); ok {
		if v, ok := b.(backend.Viewer); ok {
			view := v.View()
			cfg.View = &view
		}
	}
	return cfg
}
