package sessionremote

import (
	"context"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// Run ends the sandboxes of lost workers, checking every quarter of
// LostAfter until ctx ends: a worker heard before and silent since
// LostAfter, and a worker that holds placed sandboxes but was not heard
// in the first LostAfter of this router (the API node restarted).
func (r *Router) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.LostAfter / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, inst := range r.silent(now) {
				r.lose(inst, "no heartbeat for "+r.cfg.LostAfter.String())
			}
		}
	}
}

// silent are the instances to declare lost at now.
func (r *Router) silent(now time.Time) []instance {
	var out []instance
	r.mu.Lock()
	for inst, w := range r.workers {
		if !w.lost && now.Sub(w.heard) > r.cfg.LostAfter {
			out = append(out, inst)
		}
	}
	r.mu.Unlock()
	if now.Sub(r.started) <= r.cfg.LostAfter {
		return out
	}
	for _, name := range r.cfg.Service.PlacedWorkers() {
		inst := instance(name)
		r.mu.Lock()
		_, known := r.workers[inst]
		r.mu.Unlock()
		if !known {
			out = append(out, inst)
		}
	}
	return out
}

// lose declares inst lost: its sandboxes end failed with
// session.worker_lost and its open connections close.
func (r *Router) lose(inst instance, why string) {
	r.mu.Lock()
	w := r.workers[inst]
	if w == nil {
		w = &workerState{}
		r.workers[inst] = w
	}
	w.lost = true
	conns := r.conns[inst]
	delete(r.conns, inst)
	r.mu.Unlock()
	ids := r.cfg.Service.WorkerLost(string(inst), job.Errorf(job.CodeSessionWorkerLost, "the worker holding the sandbox was lost: %s", why).With("worker", string(inst)))
	for c := range conns {
		c.Conn.Close()
	}
	r.cfg.Logger.Warn("sandbox worker lost", "worker", string(inst), "why", why, "sandboxes", ids)
}
