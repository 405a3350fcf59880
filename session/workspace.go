package session

import (
	"context"
	"regexp"
	"strings"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
)

// A create's workspace.repository stages a git repository as the
// sandbox's workspace, as an agent task's repository is staged
// (task/stage: hardened git, no hooks, --no-local, retried on transient
// errors): workspace.branch (default: the repository's HEAD) cloned,
// workspace.commit checked out. It must be local (a path or file://
// URL) under serve's --workspace-root, checked as workspace.path is; a
// remote one, which a task clones through the egress gateway, is not
// offered for sandboxes yet (422).

// commitPattern is what workspace.commit may be: an abbreviated or full
// object name.
var commitPattern = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)

// repository checks a create's workspace: at most one of path and
// repository; a repository local, under the roots, with a sane branch
// and commit. It returns the record's workspace, its path still to be
// checked by the caller.
func (s *Service) repository(ws *Workspace) (Workspace, error) {
	if ws == nil || ws.Repository == "" {
		if ws != nil && (ws.Branch != "" || ws.Commit != "") {
			return Workspace{}, job.Errorf(job.CodeInvalidRequest, "workspace.branch and workspace.commit need workspace.repository").With("field", "workspace.repository")
		}
		return Workspace{}, nil
	}
	bad := func(code job.Code, field, format string, args ...any) error {
		return job.Errorf(code, format, args...).With("field", "workspace."+field)
	}
	switch {
	case ws.Path != "":
		return Workspace{}, bad(job.CodeInvalidRequest, "repository", "workspace takes path or repository, not both")
	case ws.Branch != "" && (strings.HasPrefix(ws.Branch, "-") || strings.ContainsAny(ws.Branch, " \t\r\n\x00~^:?*[\\") || len(ws.Branch) > 255):
		return Workspace{}, bad(job.CodeInvalidRequest, "branch", "workspace.branch %q is not a branch name", ws.Branch)
	case ws.Commit != "" && !commitPattern.MatchString(ws.Commit):
		return Workspace{}, bad(job.CodeInvalidRequest, "commit", "workspace.commit must be 7 to 64 hex digits")
	}
	path, local, err := manifest.Repository{URL: ws.Repository}.LocalPath()
	switch {
	case err != nil:
		return Workspace{}, job.AsError(err).With("field", "workspace.repository")
	case !local:
		return Workspace{}, bad(job.CodeInvalidRequest, "repository", "a remote workspace.repository is not offered for sandboxes yet: name a local repository under the server's --workspace-root, or clone inside a sandbox with network allowlist")
	case s.cfg.Roots == nil:
		return Workspace{}, bad(job.CodePathEscape, "repository", "this server takes no local repository")
	}
	real, err := s.cfg.Roots.Check(path)
	if err != nil {
		return Workspace{}, job.AsError(err).With("field", "workspace.repository")
	}
	return Workspace{Repository: real, Branch: ws.Branch, Commit: ws.Commit}, nil
}

// cloneWorkspace clones ws's repository into dir, the sandbox's
// workspace.
func cloneWorkspace(ctx context.Context, ws Workspace, dir string) error {
	r := manifest.Repository{URL: ws.Repository, Branch: ws.Branch, Commit: ws.Commit}
	return stage.Clone(ctx, r, dir, stage.CloneBackoff)
}
