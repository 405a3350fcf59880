package session

import (
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// A sandbox's state changes go on the bus as kind EventKind, type
// EventState (ar.events.session.<id>), with an Event payload; GET
// /v1/events carries them. They only feed live viewers: the record is
// the truth, and a publish that fails is logged.
const (
	EventKind  = "session"
	EventState = "session_state"
)

// Event is the payload of a sandbox's state event: its id, state and
// expiry, and why it failed.
type Event struct {
	SandboxID string     `json:"sandbox_id"`
	State     State      `json:"state"`
	ExpiresAt time.Time  `json:"expires_at"`
	Error     *job.Error `json:"error,omitempty"`
}

// publish sends rec's state when the service has an event bus.
func (s *Service) publish(rec Record) {
	if s.cfg.Events == nil {
		return
	}
	ev := Event{SandboxID: rec.ID, State: rec.State, ExpiresAt: rec.ExpiresAt, Error: rec.Error}
	if err := s.cfg.Events.Publish(EventKind, rec.ID, EventState, ev); err != nil {
		s.cfg.Logger.Warn("cannot publish a session event", "id", rec.ID, "state", rec.State, "error", err)
	}
}
