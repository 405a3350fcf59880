package runs

import (
	"path/filepath"
	"slices"

	"github.com/agent-runner/agent-runner/job"
)

// HoldsWorkspace refuses (validation.path_escape) a job workspace that
// contains a write root of a run in progress, or lies inside one: the
// run's jobs write there while the other job is snapshotted. own are the
// job's own writable mounts (a run's tool job), which never count. It is
// a jobs.HoldCheck.
func (s *Service) HoldsWorkspace(path string, own []string) error {
	if path == "" {
		return nil
	}
	ws, err := filepath.EvalSymlinks(path)
	if err != nil {
		ws = filepath.Clean(path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.running {
		for _, w := range a.reach.write {
			if slices.Contains(own, w) {
				continue
			}
			_, inside := below(w, ws)
			_, around := below(ws, w)
			if inside || around || w == ws {
				return job.Errorf(job.CodePathEscape, "workspace %s overlaps write root %s of %s, which is written while it runs", path, w, a.name()).
					With("write_root", w)
			}
		}
	}
	return nil
}
