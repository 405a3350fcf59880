package jobs

import (
	"sync"

	"github.com/agent-runner/agent-runner/job"
)

// A HoldCheck refuses a workspace path that another door holds writable
// while it runs (a capability run's write roots): a workspace that
// contains such a tree, or lies inside one, is written by someone else
// while it is snapshotted. It returns nil for a path it does not hold.
type HoldCheck func(path string) error

// holds are the checks doors added with Hold.
type holds struct {
	mu     sync.Mutex
	checks []HoldCheck
}

// Hold adds a check every submitted workspace.path must pass (after the
// workspace roots): serve adds the capability runs' write roots in
// progress. Checks are kept for the service's life.
func (s *Service) Hold(check HoldCheck) {
	s.holds.mu.Lock()
	s.holds.checks = append(s.holds.checks, check)
	s.holds.mu.Unlock()
}

// held runs the checks on a workspace path.
func (s *Service) held(path string) error {
	s.holds.mu.Lock()
	checks := append([]HoldCheck(nil), s.holds.checks...)
	s.holds.mu.Unlock()
	for _, c := range checks {
		if err := c(path); err != nil {
			return job.AsError(err).With("field", "workspace.path")
		}
	}
	return nil
}
