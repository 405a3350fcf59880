package session

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/agent/audit"
	"github.com/agent-runner/agent-runner/job"
)

// Who paused a paused sandbox (Record.PausedBy): its caller (POST
// .../pause, held until resume) or the idle check (auto_pause: any call
// that needs it running resumes it).
const (
	PausedByCaller = "caller"
	PausedByIdle   = "idle"
)

// Why an expired sandbox expired (Record.EndReason): its timeout_s ran
// out, or it was idle for idle_timeout_s without auto_pause.
const (
	EndTimeout = "timeout"
	EndIdle    = "idle"
)

// A sandbox is idle when no background process of it runs, no exec is
// in flight, no client is attached (Attach: a process's event stream or
// socket, a proxied connection) and no call used it (running, Touch)
// for its idle_timeout_s. The idle check (Idle, run by ReapEvery) then
// pauses it when it was created with auto_pause (paused_by "idle"), else
// ends it expired (end_reason "idle").

// activity is when a sandbox was last used and how many calls and
// clients hold it now. Its lock is taken last: under the handle's or
// alone.
type activity struct {
	mu       sync.Mutex
	last     time.Time
	attached int
}

// touch marks the sandbox used at now.
func (a *activity) touch(now time.Time) {
	a.mu.Lock()
	a.last = now
	a.mu.Unlock()
}

// attach counts one more call or client holding the sandbox.
func (a *activity) attach(now time.Time) {
	a.mu.Lock()
	a.attached++
	a.last = now
	a.mu.Unlock()
}

// detach ends what attach counted, marking the sandbox used at now.
func (a *activity) detach(now time.Time) {
	a.mu.Lock()
	a.attached--
	a.last = now
	a.mu.Unlock()
}

// idleSince is when the sandbox became idle (the zero time: it is not),
// given when it was created.
func (a *activity) idleSince(created time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.attached > 0 {
		return time.Time{}
	}
	if a.last.After(created) {
		return a.last
	}
	return created
}

// idleTimeout is a create's idle_timeout_s within the operator's
// maximum, or the operator's default: auto_pause needs one.
func (s *Service) idleTimeout(req CreateRequest) (int64, error) {
	maxS := int64(s.cfg.MaxIdleTimeout / time.Second)
	idle := req.IdleTimeoutS
	switch {
	case idle < 0:
		return 0, job.Errorf(job.CodeInvalidRequest, "idle_timeout_s must be positive").With("field", "idle_timeout_s")
	case idle == 0:
		idle = int64(s.cfg.DefaultIdleTimeout / time.Second)
	case idle > maxS:
		return 0, job.Errorf(job.CodeLimitExceeded, "idle_timeout_s exceeds the server maximum").With("field", "idle_timeout_s").With("max", maxS).With("value", idle)
	}
	if req.AutoPause && idle == 0 {
		return 0, job.Errorf(job.CodeInvalidRequest, "auto_pause needs idle_timeout_s (this server sets no default)").With("field", "auto_pause")
	}
	return idle, nil
}

// wake resumes h (locked) when it was paused for being idle, or at its
// timeout with auto_resume (then expiring timeout_s from now), and the
// call that found it, accepting only states ok, needs it running. A
// sandbox that cannot be thawed stays paused (the call answers
// session.not_running).
func (s *Service) wake(h *handle, ok []State) {
	wakes := h.rec.PausedBy == PausedByIdle || (h.rec.PausedBy == PausedByTimeout && h.rec.AutoResume)
	if h.rec.State != StatePaused || !wakes || !slices.Contains(ok, StateRunning) || slices.Contains(ok, StatePaused) {
		return
	}
	by := h.rec.PausedBy
	if _, err := s.thaw(context.Background(), h); err != nil {
		s.cfg.Logger.Warn("cannot resume a paused sandbox for a call", "id", h.rec.ID, "paused_by", by, "error", err)
		return
	}
	s.auditAuto(h, AuditResume, by)
}

// auditAuto records the service's own pause or resume of h (by: why,
// "idle" or "timeout"): a line that cannot be written is logged, and
// breaks h's log (the next call is refused).
func (s *Service) auditAuto(h *handle, tool, by string) {
	e := audit.Event{Event: audit.EventSandboxCall, Tool: tool, Args: encodeJSON(map[string]any{"auto": by}), OK: audit.Bool(true)}
	if err := h.audit.append(e); err != nil {
		s.cfg.Logger.Warn("cannot record a sandbox call", "id", h.rec.ID, "tool", tool, "error", err)
	}
}

// Attach counts a client of running sandbox id (a proxied connection, a
// stream a door holds open) until detach is called, once: meanwhile the
// sandbox is never idle. A sandbox paused for being idle is resumed; one
// its caller paused is session.not_running. Doors call it for what they
// hold open (docs/sessions.md "Idle").
func (s *Service) Attach(id string) (detach func(), err error) {
	h, err := s.running(id, StateRunning)
	if err != nil {
		return nil, err
	}
	h.mu.Unlock()
	return s.hold(h), nil
}

// hold counts one more holder of h until the returned func is called
// (more calls do nothing).
func (s *Service) hold(h *handle) func() {
	h.act.attach(s.now())
	var once sync.Once
	return func() { once.Do(func() { h.act.detach(s.now()) }) }
}

// Touch marks live sandbox id used now: its idle time starts again. It
// resumes nothing; an unknown or ended sandbox is ignored.
func (s *Service) Touch(id string) {
	if h := s.handle(id); h != nil {
		h.act.touch(s.now())
	}
}

// Idle pauses (auto_pause) or ends expired every running sandbox idle
// for its idle_timeout_s at now, and returns their ids.
func (s *Service) Idle(now time.Time) (paused, expired []string) {
	for _, h := range s.handles() {
		h.mu.Lock()
		id, due := h.rec.ID, s.idleDue(h, now)
		auto := h.rec.AutoPause
		if due && auto {
			if err := h.sb.Pause(context.Background()); err != nil {
				s.cfg.Logger.Warn("cannot pause an idle sandbox", "id", id, "error", err)
			} else {
				h.rec.PausedBy = PausedByIdle
				if _, err := s.move(h, StatePaused); err != nil {
					s.cfg.Logger.Warn("cannot record an idle sandbox's pause", "id", id, "error", err)
				}
				s.auditAuto(h, AuditPause, PausedByIdle)
				paused = append(paused, id)
			}
		}
		h.mu.Unlock()
		if due && !auto {
			if _, ok := s.endIf(h, StateExpired, nil, "", func(h *handle) (string, bool) { return EndIdle, s.idleDue(h, now) }); ok {
				expired = append(expired, id)
			}
		}
	}
	sort.Strings(paused)
	sort.Strings(expired)
	return paused, expired
}

// idleDue reports whether h (locked) is running and has been idle for
// its idle_timeout_s at now.
func (s *Service) idleDue(h *handle, now time.Time) bool {
	if h.rec.State != StateRunning || h.rec.IdleTimeoutS <= 0 || h.procs.running() > 0 {
		return false
	}
	since := h.act.idleSince(h.rec.CreatedAt)
	return !since.IsZero() && !now.Before(since.Add(time.Duration(h.rec.IdleTimeoutS)*time.Second))
}
