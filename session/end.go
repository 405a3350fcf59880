package session

import (
	"context"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// Close deletes every live sandbox of this process (serve is stopping):
// each is recorded failed with run.interrupted, as after a crash. The
// pooled sandboxes are deleted too.
func (s *Service) Close() {
	s.closePools()
	for _, h := range s.handles() {
		s.end(h, StateFailed, job.Errorf(job.CodeRunInterrupted, "the server stopped"))
	}
}

// end deletes h's sandbox and records it ended in st (unless it already
// ended). It reports whether this call ended it.
func (s *Service) end(h *handle, st State, cause *job.Error) (Record, bool) {
	return s.endIf(h, st, cause, "", nil)
}

// endIf is end when due (nil: always, with no end_reason) holds of h
// once it is locked; due also gives the record's end_reason. by is who
// ended it (the token name of a caller's delete) for its audit log's
// run_end line, which is written before the record says it ended.
func (s *Service) endIf(h *handle, st State, cause *job.Error, by string, due func(*handle) (reason string, ok bool)) (Record, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	reason := ""
	if due != nil {
		var ok bool
		if reason, ok = due(h); !ok {
			return h.rec, false
		}
	}
	if !h.rec.State.Live() {
		return h.rec, false
	}
	h.rec.EndReason, h.rec.PausedBy = reason, ""
	// Its last usage stays in its record.
	h.rec.Usage = s.usage(h)
	if err := h.sb.Close(); err != nil {
		s.cfg.Logger.Warn("cannot delete a sandbox", "id", h.rec.ID, "error", err)
	}
	// Its processes died with it: wait until each is recorded.
	h.procs.wait()
	h.stop()
	ended(&h.rec, st, s.now(), cause)
	s.endAudit(h.audit, h.rec, by)
	if err := s.save(h.rec); err != nil {
		s.cfg.Logger.Warn("cannot record a sandbox's end", "id", h.rec.ID, "error", err)
	}
	s.mu.Lock()
	delete(s.live, h.rec.ID)
	s.mu.Unlock()
	if h.dir != "" {
		s.removeDir(h.dir)
	} else {
		s.removeWorkspace(h.rec.ID)
	}
	return h.rec, true
}

// Delete deletes sandbox id (its processes are killed, its workspace
// removed) and records it stopped; an ended sandbox is answered as it
// is. Its audit log's last line names ctx's caller (WithOwner).
func (s *Service) Delete(ctx context.Context, id string) (Record, error) {
	h := s.handle(id)
	if h == nil {
		return read(s.cfg.Records, id)
	}
	rec, _ := s.endIf(h, StateStopped, nil, ownerOf(ctx), nil)
	return rec, nil
}

// ReapEvery calls Reap and Idle every interval until ctx ends.
func (s *Service) ReapEvery(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := s.now()
			if paused, expired := s.Reap(now); len(paused) > 0 || len(expired) > 0 {
				s.cfg.Logger.Info("sandboxes timed out", "paused", paused, "expired", expired)
			}
			paused, expired := s.Idle(now)
			if len(paused) > 0 || len(expired) > 0 {
				s.cfg.Logger.Info("idle sandboxes", "paused", paused, "expired", expired)
			}
		}
	}
}

// Retention is how long an ended sandbox's record is kept.
const Retention = 7 * 24 * time.Hour

// Retain removes the records of sandboxes ended more than Retention ago
// (the store's one retention) and returns their ids.
func (s *Service) Retain(now time.Time) ([]string, error) {
	return s.cfg.Records.Retain(now, store.Expiry{
		Ended: func(id string) (store.Ending, error) {
			rec, err := read(s.cfg.Records, id)
			if err != nil || rec.EndedAt == nil {
				return store.Ending{}, err
			}
			return store.Ending{Terminal: !rec.State.Live(), At: *rec.EndedAt, Keep: Retention}, nil
		},
		Busy: func(id string) bool { return s.handle(id) != nil },
	})
}
