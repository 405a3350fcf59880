package session

import (
	"context"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// Pause freezes running sandbox id's processes (the backend's freezer);
// a paused one is answered as it is (paused_by "caller" from then: one
// the idle check paused now holds until Resume too; one paused at its
// timeout stays paused_by "timeout", held at most MaxPaused). Execs and
// file writes answer session.not_running until Resume; file reads still
// answer. A backend that cannot freeze is backend.unavailable and the
// sandbox keeps running.
func (s *Service) Pause(ctx context.Context, id string) (rec Record, err error) {
	err = s.audited(id, &call{tool: AuditPause}, func() error {
		rec, err = s.pause(ctx, id)
		return err
	})
	return rec, err
}

func (s *Service) pause(ctx context.Context, id string) (Record, error) {
	h, err := s.running(id, StateRunning, StatePaused)
	if err != nil {
		return Record{}, err
	}
	defer h.mu.Unlock()
	if h.rec.State == StatePaused && (h.rec.PausedBy == PausedByCaller || h.rec.PausedBy == PausedByTimeout) {
		return h.rec, nil
	}
	if h.rec.State == StateRunning {
		if err := h.sb.Pause(ctx); err != nil {
			return Record{}, err
		}
	}
	// A caller's pause holds until resume, an idle one's too from now.
	h.rec.PausedBy = PausedByCaller
	return s.move(h, StatePaused)
}

// Resume thaws paused sandbox id; a running one is answered as it is.
// One paused at its timeout expires timeout_s from now.
func (s *Service) Resume(ctx context.Context, id string) (rec Record, err error) {
	err = s.audited(id, &call{tool: AuditResume}, func() error {
		rec, err = s.resume(ctx, id)
		return err
	})
	return rec, err
}

func (s *Service) resume(ctx context.Context, id string) (Record, error) {
	h, err := s.running(id, StateRunning, StatePaused)
	if err != nil {
		return Record{}, err
	}
	defer h.mu.Unlock()
	if h.rec.State == StateRunning {
		return h.rec, nil
	}
	return s.thaw(ctx, h)
}

// SetTimeout makes live sandbox id expire timeoutS seconds from now
// (within the operator's maximum). Of a sandbox paused at its timeout it
// sets only timeout_s, what its resume gives it: its expires_at stays
// the end of its hold (MaxPaused).
func (s *Service) SetTimeout(id string, timeoutS int64) (rec Record, err error) {
	c := &call{tool: AuditSetTimeout, args: map[string]any{"timeout_s": timeoutS}}
	err = s.audited(id, c, func() error {
		rec, err = s.setTimeout(id, timeoutS)
		if err == nil {
			c.result = map[string]any{"expires_at": rec.ExpiresAt}
		}
		return err
	})
	return rec, err
}

func (s *Service) setTimeout(id string, timeoutS int64) (Record, error) {
	switch {
	case timeoutS <= 0:
		return Record{}, job.Errorf(job.CodeInvalidRequest, "timeout_s must be positive").With("field", "timeout_s")
	case timeoutS > int64(s.cfg.MaxTimeout/time.Second):
		return Record{}, job.Errorf(job.CodeLimitExceeded, "timeout_s exceeds the server maximum").With("field", "timeout_s").With("max", int64(s.cfg.MaxTimeout/time.Second)).With("value", timeoutS)
	}
	h, err := s.running(id, StateRunning, StatePaused)
	if err != nil {
		return Record{}, err
	}
	defer h.mu.Unlock()
	now := s.now()
	h.rec.TimeoutS, h.rec.UpdatedAt = timeoutS, now
	if h.rec.PausedBy != PausedByTimeout {
		h.rec.ExpiresAt = expiry(now, timeoutS)
	}
	return h.rec, s.save(h.rec)
}

// move records h (locked) in state st.
func (s *Service) move(h *handle, st State) (Record, error) {
	h.rec.State, h.rec.UpdatedAt = st, s.now()
	return h.rec, s.save(h.rec)
}
