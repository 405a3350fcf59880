package e2bapi

import (
	"path"
	"strings"

	"github.com/agent-runner/agent-runner/job"
)

// workspacePath maps a path as an E2B program names it onto the
// sandbox's workspace: relative to it (a relative path, or an absolute
// one under the user's home or the workspace as processes see it); any
// other absolute path is outside what the door can reach.
func (d *Door) workspacePath(p string) (string, error) {
	if p == "" || !strings.HasPrefix(p, "/") {
		return cleanRelative(p), nil
	}
	clean := path.Clean(p)
	for _, root := range []string{d.cfg.Home, d.cfg.Workspace} {
		if clean == root {
			return ".", nil
		}
		if rest, ok := strings.CutPrefix(clean, root+"/"); ok {
			return rest, nil
		}
	}
	return "", job.Errorf(job.CodePathEscape, "path %s is outside the sandbox's workspace: the E2B-compatible API reaches %s (also named %s) and paths relative to it", p, d.cfg.Home, d.cfg.Workspace).With("path", p)
}

// cleanRelative is a relative path cleaned ("." for none); a path that
// climbs out is left for the session service to refuse.
func cleanRelative(p string) string {
	if p == "" {
		return "."
	}
	return path.Clean(p)
}

// sandboxPath is a workspace-relative path as the sandbox's processes
// see it.
func (d *Door) sandboxPath(rel string) string {
	return path.Join(d.cfg.Workspace, rel)
}

// checkUser refuses a user other than E2B's default: every process and
// file of a sandbox is its own user's.
func checkUser(user string) error {
	if user == "" || user == "user" {
		return nil
	}
	return notSupported("acting as user " + user + " (every command and file of a sandbox is its own user's)")
}
