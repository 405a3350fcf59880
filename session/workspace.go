package session

import (
	"context"
	"net"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
)

// A create's workspace.repository stages a git repository as the
// sandbox's workspace, as an agent task's repository is staged
// (task/stage: hardened git, no hooks, --no-local, retried on transient
// errors): workspace.branch (default: the repository's HEAD) cloned,
// workspace.commit checked out, with the same checks as a task's. A
// local one (a path or file:// URL) must lie under serve's
// --workspace-root, as workspace.path does; a remote one must be http
// or https and its host within the operator's egress ceiling, and is
// cloned through the egress gateway with only that host allowed (its
// decisions in the sandbox's EgressFile, run "<id>/clone"), never over
// the host's network.

// commitPattern is what workspace.commit may be: an abbreviated or full
// object name.
var commitPattern = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)

// repository checks a create's workspace: at most one of path and
// repository; a repository local under the roots, or remote within the
// egress ceiling, with a sane branch and commit. It returns the record's
// workspace, its path still to be checked by the caller.
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
	out := Workspace{Repository: ws.Repository, Branch: ws.Branch, Commit: ws.Commit}
	repo := manifest.Repository{URL: ws.Repository}
	path, local, err := repo.LocalPath()
	if err != nil {
		return Workspace{}, job.AsError(err).With("field", "workspace.repository")
	}
	if !local {
		rule, _, err := repo.CloneRule()
		if err != nil {
			return Workspace{}, job.AsError(err).With("field", "workspace.repository")
		}
		return out, s.cfg.Egress.Narrow([]egress.Rule{rule}, "workspace.repository")
	}
	if s.cfg.Roots == nil {
		return Workspace{}, bad(job.CodePathEscape, "repository", "this server takes no local repository")
	}
	if out.Repository, err = s.cfg.Roots.Check(path); err != nil {
		return Workspace{}, job.AsError(err).With("field", "workspace.repository")
	}
	return out, nil
}

// cloneWorkspace clones sandbox id's workspace.repository into dir, its
// workspace: a remote one through a proxy of the egress gateway that
// lets only the repository's host through, for as long as the clone
// runs.
func (s *Service) cloneWorkspace(ctx context.Context, id string, ws Workspace, dir string) error {
	r := manifest.Repository{URL: ws.Repository, Branch: ws.Branch, Commit: ws.Commit}
	rule, remote, err := r.CloneRule()
	if err != nil {
		return err
	}
	proxy := ""
	if remote {
		var stop func()
		if proxy, stop, err = s.cloneProxy(ctx, id, rule); err != nil {
			return err
		}
		defer stop()
	}
	return stage.Clone(ctx, r, dir, proxy, stage.CloneBackoff)
}

// cloneProxy serves the gateway on a loopback TCP port (git speaks to
// proxies over TCP) allowing only rule, its decisions in sandbox id's
// EgressFile; it returns the proxy's URL and the function that stops it.
func (s *Service) cloneProxy(ctx context.Context, id string, rule egress.Rule) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot open the clone's egress proxy")
	}
	log := egress.NewAuditLogMax(filepath.Join(s.cfg.Records.Path(id), EgressFile), 0)
	run := &egress.Run{ID: id + "/clone", Rules: []egress.Rule{rule}, Audit: func(d egress.Decision) {
		if err := log.Write(d); err != nil {
			s.cfg.Logger.Warn("cannot record an egress decision", "id", id, "error", err)
		}
	}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.cfg.Egress.Gateway.Serve(ctx, ln, run, nil); err != nil {
			s.cfg.Logger.Warn("the clone's egress proxy stopped", "id", id, "error", err)
		}
	}()
	return "http://" + ln.Addr().String(), func() {
		cancel()
		<-done
		if err := log.Close(); err != nil {
			s.cfg.Logger.Warn("cannot close a sandbox's egress log", "id", id, "error", err)
		}
	}, nil
}
