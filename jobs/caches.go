package jobs

import (
	"slices"

	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/job"
)

// cacheCaller refuses workspace.caches from a door without a caller to
// scope them to: there is no namespace every caller shares, except the
// names the operator declares shared.
func cacheCaller(req *job.Request, ns string) error {
	if len(req.Workspace.Caches) == 0 {
		return nil
	}
	if ns == "" {
		return job.Errorf(job.CodeInvalidRequest, "workspace.caches: build caches belong to a caller, and this submission has none (a named token over HTTP; see docs/api.md, Build caches)").
			With("field", "workspace.caches")
	}
	if !buildcache.ValidNamespace(ns) {
		return job.Errorf(job.CodeInternal, "invalid cache namespace %q", ns)
	}
	return nil
}

// ShareCaches declares the workspace.caches names every caller shares
// (serve --shared-cache), in addition to Config.SharedCaches. Call it
// before the service takes submissions.
func (s *Service) ShareCaches(names []string) {
	s.cfg.SharedCaches = append(slices.Clip(s.cfg.SharedCaches), names...)
}

// sharedCaches are the operator's shared names that req uses, for its
// queued message.
func (s *Service) sharedCaches(req *job.Request) []string {
	var out []string
	for _, c := range req.Workspace.Caches {
		if slices.Contains(s.cfg.SharedCaches, c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}
