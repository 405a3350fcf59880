package sessionremote

import (
	"slices"
	"sort"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/validation"
)

// choose places a create that names backend (empty: each host's
// default): the host with the most free room among those that offer
// it, this node first on a tie. "" is this node. No room anywhere is
// session.limit_reached; a backend nobody offers is
// validation.invalid_request.
func (r *Router) choose(backend string) (instance, error) {
	kind := validation.NormalizeKind(backend)
	offers := func(kinds []string) bool { return kind == "" || slices.Contains(kinds, kind) }
	var best instance
	bestFree, hosts := 0, 0
	if r.cfg.Local && offers(r.cfg.LocalBackends) {
		live, max := r.cfg.Service.Load()
		hosts, bestFree = 1, max-live
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	names := make([]instance, 0, len(r.workers))
	for inst := range r.workers {
		names = append(names, inst)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, inst := range names {
		w := r.workers[inst]
		if w.lost || now.Sub(w.heard) > r.cfg.LostAfter || !offers(w.beat.Backends) {
			continue
		}
		hosts++
		if free := w.beat.Max - w.beat.Live - w.placed; free > bestFree {
			best, bestFree = inst, free
		}
	}
	switch {
	case hosts == 0 && kind != "":
		return "", job.Errorf(job.CodeInvalidRequest, "no sandbox host offers backend %q", kind).With("field", "backend")
	case hosts == 0:
		return "", job.Errorf(job.CodeSessionLimit, "no sandbox host is available (this server hosts none and no worker is heard)").With("hosts", 0)
	case bestFree <= 0:
		return "", job.Errorf(job.CodeSessionLimit, "every sandbox host is full; delete a sandbox first").With("hosts", hosts)
	}
	if best != "" {
		r.workers[best].placed++
	}
	return best, nil
}
