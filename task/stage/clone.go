package stage

import (
	"context"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/manifest"
)

// Clone clones the local repository r (a path or file:// URL; a remote
// one is refused) into dir as Stage clones a task's
// (hardened git, --no-local, r.Branch, else the repository's HEAD, and
// r.Commit checked out), retried with b on transient errors only, for
// callers that stage a repository without a task's layout (kept
// sandboxes: package session). dir is emptied before each try.
func Clone(ctx context.Context, r manifest.Repository, dir string, b Backoff) error {
	// A remote one would be fetched on the host's network, around the
	// egress gateway: only Stage clones those (through its proxy).
	if _, local, err := r.LocalPath(); err != nil || !local {
		return job.Errorf(job.CodeInvalidRequest, "stage.Clone takes local repositories only").With("field", "repository.url")
	}
	return b.Retry(ctx, func() error {
		if err := emptyDir(dir); err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "cannot clear the directory for the clone")
		}
		return clone(ctx, r, dir, "")
	}, TransientGitError)
}
