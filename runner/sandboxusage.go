package runner

import "github.com/agent-runner/agent-runner/backend"

// Usage reads the sandbox's live usage, every process of it together,
// when its backend can (backend.UsageSampler); ok is false when it
// cannot (a backend without one, a sandbox without a cgroup).
func (s *Sandbox) Usage() (u backend.Usage, ok bool) {
	sampler, can := s.sb.(backend.UsageSampler)
	if !can {
		return backend.Usage{}, false
	}
	return sampler.SampleUsage()
}
