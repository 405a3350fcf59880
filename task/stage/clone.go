package stage

import (
	"context"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/manifest"
)

// Clone clones repository r into dir as Stage clones a task's (hardened
// git, --no-local, r.Branch, else the repository's HEAD, and r.Commit
// checked out), retried with b on transient errors only, for callers
// that stage a repository without a task's layout (kept sandboxes:
// package session). A remote r is fetched through the HTTP proxy at
// proxy (the egress gateway) and refused without one: it is never
// fetched on the host's network. dir is emptied before each try.
func Clone(ctx context.Context, r manifest.Repository, dir, proxy string, b Backoff) error {
	if _, local, err := r.LocalPath(); err != nil || (!local && proxy == "") {
		return job.Errorf(job.CodeNetworkDenied, "a remote repository is cloned through the egress gateway only").With("field", "repository.url")
	}
	return b.Retry(ctx, func() error {
		if err := emptyDir(dir); err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "cannot clear the directory for the clone")
		}
		return clone(ctx, r, dir, proxy)
	}, TransientGitError)
}
