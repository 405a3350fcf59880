package session

import "github.com/agent-runner/agent-runner/job"

// checkRepository refuses workspace.repository: staging a git
// repository as a sandbox's workspace (as an agent task's is staged,
// task/stage, through the egress gateway for a remote one) is not built
// for sandboxes yet. A caller copies a directory under --workspace-root
// (workspace.path), or clones inside a sandbox with network allowlist.
func checkRepository(ws *Workspace) error {
	if ws == nil || ws.Repository == "" {
		return nil
	}
	return job.Errorf(job.CodeInvalidRequest, "workspace.repository is not offered for sandboxes yet: use workspace.path (a directory under the server's --workspace-root), or clone inside a sandbox with network allowlist").With("field", "workspace.repository")
}
