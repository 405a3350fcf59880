package httpapi

import (
	"context"
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// DropUnqueued removes the records of submits that were cut off between
// writing status.json "queued" and publishing to the queue (the process
// died in between, so the caller never got a 202): a job whose status is
// queued, with no result and no message in the queue. Without this such a
// job would read as queued forever. serve calls it at startup, before it
// accepts requests, and only with its own embedded queue: with a shared
// external one another node may be mid-submit. It returns the ids it
// removed.
func (s *Server) DropUnqueued(ctx context.Context) ([]string, error) {
	st := s.cfg.Runner.Store()
	ids, err := st.List()
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(st.Dir(), "runs")); os.IsNotExist(statErr) {
			return nil, nil // a fresh store
		}
		return nil, err
	}
	var dropped []string
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(st.RunDir(id), store.ResultFile)); err == nil {
			continue
		}
		rec, err := st.ReadStatus(id)
		if err != nil || rec.Status != job.StatusQueued {
			continue
		}
		queued, err := s.cfg.Queue.Queued(ctx, id)
		if err != nil {
			return dropped, err
		}
		if !queued {
			if err := st.Remove(id); err != nil {
				return dropped, err
			}
			s.log.Warn("dropped a submit that never reached the queue", "job_id", id)
			dropped = append(dropped, id)
		}
	}
	return dropped, nil
}
