package runner

import (
	"os"

	"github.com/agent-runner/agent-runner/job"
)

// Rebind gives a sandbox opened before its user was known (a warm
// pool's, package session) the id its runs record from now on, and
// moves its workspace directory to workspace (a rename on the same
// filesystem: the sandbox's processes keep seeing the same directory,
// which the backend bound by identity, not by path). workspace must not
// exist. Rebind is for a sandbox no run has used yet: the runs recorded
// before it name the old id and directory.
func (s *Sandbox) Rebind(id, workspace string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Rename(s.spec.Workspace, workspace); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot move a sandbox's workspace to its new owner")
	}
	s.spec.ID, s.spec.Workspace = id, workspace
	return nil
}
