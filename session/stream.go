package session

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

// Feed reads the event bus (a *queue.Queue): a sandbox's own stream
// (FollowEvents) follows its subject.
type Feed interface {
	// Events streams the events of kind about id with a sequence
	// greater than after, until ctx ends.
	Events(ctx context.Context, kind, id string, after uint64) (<-chan queue.Sequenced, error)
	// LastEventSeq is the sequence of the bus's newest event.
	LastEventSeq(ctx context.Context) (uint64, error)
}

// FromRecord is FollowEvents' after for a client with no event id: the
// stream starts with the sandbox's current state, read from its record.
const FromRecord = ^uint64(0)

// StreamEvent is one event of a sandbox's stream: a flat JSON object with
// its id (the bus sequence a client resumes after), type (EventState or
// EventRun) and time, followed by its payload's fields (Event or
// RunEvent).
type StreamEvent struct {
	ID      uint64
	Type    string
	Time    time.Time
	Payload json.RawMessage
}

// MarshalJSON writes e as the flat object doors send.
func (e StreamEvent) MarshalJSON() ([]byte, error) {
	fields := map[string]any{}
	if len(e.Payload) > 0 {
		if err := json.Unmarshal(e.Payload, &fields); err != nil {
			return nil, job.Wrap(job.CodeInternal, err, "a sandbox event's payload is not a JSON object")
		}
	}
	fields["id"], fields["type"], fields["time"] = e.ID, e.Type, e.Time
	return json.Marshal(fields)
}

// FollowEvents sends sandbox id's own events to send: its state changes
// (EventState) and its runs' status changes (EventRun), each with its
// bus sequence, in order. With after FromRecord, or beyond the bus's
// newest event (the bus began again), it starts with the sandbox's
// current state from its record (an EventState with the sequence of the
// bus's newest event as its ID: a client that resumes from it misses
// nothing, though it may see a state again), then live events;
// otherwise with the events after sequence after. It returns nil once
// the sandbox's final state was sent (read from the record when the bus
// no longer has it), or when ctx ends. An unknown sandbox is
// job.not_found before anything is sent; a service without a Feed,
// queue.closed. Following does not hold the sandbox from idling.
func (s *Service) FollowEvents(ctx context.Context, id string, after uint64, send func(StreamEvent) error) error {
	if s.cfg.Feed == nil {
		return job.Errorf(job.CodeQueueClosed, "this server has no event bus to follow a sandbox's events on")
	}
	if _, err := s.current(id); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	last, err := s.cfg.Feed.LastEventSeq(ctx)
	if err != nil {
		return err
	}
	// An id beyond the bus (its memory stream began again with a
	// restart) starts from the record too: waiting for it would miss
	// what comes before.
	fromRecord := after == FromRecord || after > last
	if fromRecord {
		after = last
	}
	events, err := s.cfg.Feed.Events(ctx, EventKind, id, after)
	if err != nil {
		return err
	}
	if fromRecord {
		// Read once the stream is in place: no change falls between.
		rec, err := s.current(id)
		if err != nil {
			return err
		}
		if err := send(recordEvent(after, rec)); err != nil || !rec.State.Live() {
			return err
		}
	}
	idle := time.NewTimer(500 * time.Millisecond)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			if ev.Type != EventState && ev.Type != EventRun {
				continue
			}
			after = ev.Seq
			if err := send(StreamEvent{ID: ev.Seq, Type: ev.Type, Time: ev.Time, Payload: ev.Payload}); err != nil {
				return err
			}
			if ev.Type == EventState && finalState(ev.Payload) {
				return nil
			}
			idle.Reset(500 * time.Millisecond)
		case <-idle.C:
			// Nothing live: a sandbox that ended before the events after
			// after (or whose final event the bus no longer keeps) ends
			// the stream with its recorded state.
			if rec, err := s.current(id); err == nil && !rec.State.Live() {
				return send(recordEvent(after, rec))
			}
			idle.Reset(time.Second)
		}
	}
}

// current is sandbox id's record as it stands (Get without its usage,
// which a follower that looks every second does not need).
func (s *Service) current(id string) (Record, error) {
	if h := s.handle(id); h != nil {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.rec, nil
	}
	return read(s.cfg.Records, id)
}

// recordEvent is rec's state as an EventState of the stream, with id as
// its ID.
func recordEvent(id uint64, rec Record) StreamEvent {
	b, _ := json.Marshal(Event{SandboxID: rec.ID, State: rec.State, ExpiresAt: rec.ExpiresAt, Error: rec.Error})
	return StreamEvent{ID: id, Type: EventState, Time: rec.UpdatedAt, Payload: b}
}

// finalState reports whether an EventState payload is an ended state.
func finalState(payload json.RawMessage) bool {
	var ev Event
	return json.Unmarshal(payload, &ev) == nil && ev.State != "" && !ev.State.Live()
}
