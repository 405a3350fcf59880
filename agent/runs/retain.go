package runs

import (
	"os"
	"path/filepath"
	"time"

	"github.com/agent-runner/agent-runner/store"
)

// Retain removes the runs that ended more than Config.Retention before
// now and returns their ids: the store's retention (store.Records.Retain),
// which never removes a run in progress (in this process, or holding its
// record's lock in another). A finished run ended when its summary says;
// an interrupted one (no summary, in progress nowhere) when its audit log
// was last written.
func (s *Service) Retain(now time.Time) ([]string, error) {
	return s.records.Retain(now, store.Expiry{
		Ended: s.ending,
		Busy: func(id string) bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			_, ok := s.running[id]
			return ok
		},
		Skipped: func(id string, err error) {
			s.cfg.Logger.Warn("retention skips an agent run", "run_id", id, "error", err)
		},
	})
}

// ending is a run's part in retention. Retain asks only about runs in
// progress nowhere, so every run it asks about is terminal.
func (s *Service) ending(id string) (store.Ending, error) {
	dir := s.records.Path(id)
	end := store.Ending{Terminal: true, Keep: s.cfg.Retention}
	if sum, err := readSummary(dir); err == nil {
		end.At = sum.EndedAt
		return end, nil
	}
	fi, err := os.Stat(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		// A record launch.Open never filled: as old as its directory.
		if fi, err = os.Stat(dir); err != nil {
			return store.Ending{}, err
		}
	}
	end.At = fi.ModTime()
	return end, nil
}
