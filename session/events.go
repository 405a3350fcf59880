package session

// EventKind is the kind of a sandbox's events on the bus
// (ar.events.session.<id>), which GET /v1/events carries: one event of
// type EventState, whose payload is the sandbox's Record, each time its
// state changes (and when its timeout is set). Events only feed live
// viewers: the record is the truth, and a publish that fails is logged.
const (
	EventKind  = "session"
	EventState = "state"
)

// publish sends rec's state when the service has an event bus.
func (s *Service) publish(rec Record) {
	if s.cfg.Events == nil {
		return
	}
	if err := s.cfg.Events.Publish(EventKind, rec.ID, EventState, rec); err != nil {
		s.cfg.Logger.Warn("cannot publish a session event", "id", rec.ID, "state", rec.State, "error", err)
	}
}
