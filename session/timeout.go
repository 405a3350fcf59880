package session

import (
	"context"
	"sort"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// What happens when a sandbox's expires_at passes (Record.OnTimeout): it
// ends expired, or it is paused (paused_by "timeout") and held until
// resumed, at most the operator's MaxPaused.
const (
	OnTimeoutEnd   = "end"
	OnTimeoutPause = "pause"
)

// PausedByTimeout is Record.PausedBy of a sandbox paused at its timeout
// (on_timeout "pause"); EndPausedTooLong the end_reason of one that then
// stayed paused for MaxPaused.
const (
	PausedByTimeout  = "timeout"
	EndPausedTooLong = "paused_too_long"
)

// DefaultMaxPaused is how long a sandbox paused at its timeout is held
// when Config.MaxPaused is zero.
const DefaultMaxPaused = 24 * time.Hour

// onTimeout is a create's on_timeout (empty: "end"), checked with its
// auto_resume, which needs "pause".
func onTimeout(req CreateRequest) (string, error) {
	switch req.OnTimeout {
	case "", OnTimeoutEnd:
		if req.AutoResume {
			return "", job.Errorf(job.CodeInvalidRequest, "auto_resume needs on_timeout %q", OnTimeoutPause).With("field", "auto_resume")
		}
		return OnTimeoutEnd, nil
	case OnTimeoutPause:
		return OnTimeoutPause, nil
	}
	return "", job.Errorf(job.CodeInvalidRequest, "on_timeout must be %q or %q", OnTimeoutEnd, OnTimeoutPause).With("field", "on_timeout")
}

// Reap acts on every live sandbox whose expires_at is not after now and
// returns the ids it paused and those it ended. A sandbox created with
// on_timeout "pause" is paused (paused_by "timeout"; one already paused
// by its caller or the idle check stays frozen and is paused_by
// "timeout" from then) and held until now plus MaxPaused, its new
// expires_at; it ends expired when that passes too (end_reason
// "paused_too_long"). Any other ends expired (end_reason "timeout"), as
// does one the backend cannot freeze.
func (s *Service) Reap(now time.Time) (paused, expired []string) {
	for _, h := range s.handles() {
		if id, ok := s.pauseAtTimeout(h, now); ok {
			paused = append(paused, id)
			continue
		}
		due := func(h *handle) (string, bool) {
			if h.rec.ExpiresAt.After(now) {
				return "", false
			}
			if h.rec.PausedBy == PausedByTimeout {
				return EndPausedTooLong, true
			}
			return EndTimeout, true
		}
		if rec, ok := s.endIf(h, StateExpired, nil, "", due); ok {
			expired = append(expired, rec.ID)
		}
	}
	sort.Strings(paused)
	sort.Strings(expired)
	return paused, expired
}

// pauseAtTimeout pauses h when its expires_at passed at now, it was
// created with on_timeout "pause" and it is not paused at its timeout
// yet, and returns its id and whether it did. A backend that cannot
// freeze leaves it running (the caller ends it).
func (s *Service) pauseAtTimeout(h *handle, now time.Time) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.rec.State.Live() || h.rec.OnTimeout != OnTimeoutPause || h.rec.PausedBy == PausedByTimeout || h.rec.ExpiresAt.After(now) {
		return "", false
	}
	if h.rec.State == StateRunning {
		if err := h.sb.Pause(context.Background()); err != nil {
			s.cfg.Logger.Warn("cannot pause a sandbox at its timeout", "id", h.rec.ID, "error", err)
			return "", false
		}
	}
	h.rec.PausedBy, h.rec.ExpiresAt = PausedByTimeout, now.Add(s.cfg.MaxPaused)
	if _, err := s.move(h, StatePaused); err != nil {
		s.cfg.Logger.Warn("cannot record a sandbox's pause at its timeout", "id", h.rec.ID, "error", err)
	}
	s.auditAuto(h, AuditPause, PausedByTimeout)
	return h.rec.ID, true
}

// thaw resumes h (locked), paused, and records it running; one paused at
// its timeout gets a new expires_at, timeout_s from now.
func (s *Service) thaw(ctx context.Context, h *handle) (Record, error) {
	if err := h.sb.Resume(ctx); err != nil {
		return Record{}, err
	}
	if h.rec.PausedBy == PausedByTimeout {
		h.rec.ExpiresAt = expiry(s.now(), h.rec.TimeoutS)
	}
	h.rec.PausedBy = ""
	return s.move(h, StateRunning)
}
