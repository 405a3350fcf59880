package runs

import (
	"path/filepath"

	"github.com/agent-runner/agent-runner/job"
)

// HoldsWorkspace refuses (validation.path_escape) a job workspace that
// contains a write root of a run in progress, or lies inside one: the
// run's tool calls write there while the other job is snapshotted. It
// is a jobs.HoldCheck.
func (s *Service) HoldsWorkspace(path string) error {
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
