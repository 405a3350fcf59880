package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

// EventReady is the first event of FollowAll: the stream is in place,
// and everything after its ID will be delivered. A client reads its lists
// after it (not before), so no change falls between the two.
const EventReady = "ready"

// Event is one event as every door sends it (SSE data line, WebSocket
// message): a flat JSON object with the event's id, type and time. A job's
// event (Follow, and the status events of FollowAll) carries the job's
// fields below; an event of another kind (FollowAll's agent task state
// changes and capability runs' progress) carries its producer's payload
// fields as the producer wrote them (Payload), and EventReady none.
type Event struct {
	// ID is the event's sequence in the events stream (0 for events
	// replayed from the run record); a client resumes after it.
	ID     uint64     `json:"id"`
	Type   string     `json:"type"`
	JobID  string     `json:"job_id,omitempty"`
	Status job.Status `json:"status,omitempty"`
	// Text is an output chunk as UTF-8 (invalid bytes replaced); Base64
	// carries the exact bytes when the chunk is not valid UTF-8.
	Text    string    `json:"text,omitempty"`
	Base64  []byte    `json:"base64,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Time    time.Time `json:"time"`
	// Egress is an egress gateway decision (type "egress").
	Egress json.RawMessage `json:"egress,omitempty"`
	// Kind is the bus kind of the event (job.EventKind for a job's; empty
	// for EventReady).
	Kind string `json:"-"`
	// Payload is the producer's payload of an event of another kind: its
	// fields follow id, type and time in the flat object.
	Payload json.RawMessage `json:"-"`
}

// MarshalJSON writes e as the flat object doors send.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	if e.Kind == "" || e.Kind == job.EventKind {
		return json.Marshal(plain(e))
	}
	return flatten(e.ID, e.Type, e.Time, e.Payload)
}

// flatten is {"id":id,"type":typ,"time":t} followed by payload's fields
// (a JSON object; anything else is left out).
func flatten(id uint64, typ string, t time.Time, payload json.RawMessage) ([]byte, error) {
	head, err := json.Marshal(struct {
		ID   uint64    `json:"id"`
		Type string    `json:"type"`
		Time time.Time `json:"time"`
	}{id, typ, t})
	if err != nil {
		return nil, err
	}
	body := bytes.TrimSpace(payload)
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return head, nil
	}
	inner := bytes.TrimSpace(body[1 : len(body)-1])
	if len(inner) == 0 {
		return head, nil
	}
	out := make([]byte, 0, len(head)+1+len(inner)+1)
	out = append(out, head[:len(head)-1]...)
	out = append(out, ',')
	out = append(out, inner...)
	return append(out, '}'), nil
}

// toEvent is the door's event for an envelope off the bus: a job's with
// its payload decoded, another kind's passed through.
func toEvent(ev queue.Sequenced) Event {
	if ev.Kind != job.EventKind {
		return Event{ID: ev.Seq, Type: ev.Type, Time: ev.Time, Kind: ev.Kind, Payload: ev.Payload}
	}
	p, _ := job.DecodeEventPayload(ev.Payload)
	out := Event{ID: ev.Seq, Type: ev.Type, JobID: ev.ID, Status: p.Status, Attempt: p.Attempt, Time: ev.Time, Kind: job.EventKind}
	if ev.Type == job.EventEgress {
		out.Egress = p.Egress
		return out
	}
	if len(p.Data) > 0 {
		out.Text = string(p.Data)
		if !utf8.Valid(p.Data) {
			out.Base64 = p.Data
		}
	}
	return out
}

// Exists reports job.not_found for an id with no record.
func (s *Service) Exists(id string) error {
	if _, err := s.Store().ReadStatus(id); err != nil {
		return notFound(id)
	}
	return nil
}

// Follow delivers a job's events after lastID to send until the terminal
// status event, ctx ends, or send fails. A finished job whose live events
// have expired (a restart, or older than the events stream keeps) is
// replayed from its record instead.
func (s *Service) Follow(ctx context.Context, id string, lastID uint64, send func(Event) error) error {
	if err := s.Exists(id); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := s.cfg.Queue.Events(ctx, job.EventKind, id, lastID)
	if err != nil {
		return err
	}
	idle := time.NewTimer(500 * time.Millisecond)
	defer idle.Stop()
	seen := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			seen = true
			if err := send(toEvent(ev)); err != nil {
				return err
			}
			if out := toEvent(ev); ev.Kind == job.EventKind && ev.Type == job.EventStatus && out.Status.Terminal() {
				return nil
			}
		case <-idle.C:
			// No live events: if the job is already finished, send what
			// the record holds and stop.
			if res, err := s.Store().ReadResult(id); err == nil {
				if !seen && lastID == 0 {
					return sendRecorded(res, send)
				}
				// The client already has the output; close with the
				// terminal status.
				return send(Event{Type: job.EventStatus, JobID: id, Status: res.Status, Attempt: res.Attempt, Time: res.EndedAt})
			}
			idle.Reset(time.Second)
		}
	}
}

func sendRecorded(res job.Result, send func(Event) error) error {
	for _, out := range []struct {
		typ string
		o   job.Output
	}{{job.EventStdout, res.Stdout}, {job.EventStderr, res.Stderr}} {
		if out.o.Text != "" {
			if err := send(Event{Type: out.typ, JobID: res.JobID, Text: out.o.Text, Time: res.EndedAt}); err != nil {
				return err
			}
		}
	}
	return send(Event{Type: job.EventStatus, JobID: res.JobID, Status: res.Status, Attempt: res.Attempt, Time: res.EndedAt})
}

// FollowAll delivers every job's status events, every agent task's state
// changes and every capability run's progress published after the stream
// sequence after (from now on when FromNow; 0 is before the first event)
// to send, until ctx ends or send fails: the live feed of lists.
// The first event is EventReady with the sequence it starts after as ID.
// Output chunks and egress decisions stay on each job's own stream
// (Follow). Events older than the events stream keeps are gone, so a
// client that resumes after a long absence reads its lists again; so does
// one whose after lies beyond the stream's last event (the memory stream
// began again with a restart): it starts from now, as the ready event's
// ID says.
func (s *Service) FollowAll(ctx context.Context, after uint64, send func(Event) error) error {
	q := s.cfg.Queue
	last, err := q.LastEventSeq(ctx)
	if err != nil {
		return err
	}
	if after == FromNow || after > last {
		after = last
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := q.AllEvents(ctx, after, inFeed)
	if err != nil {
		return err
	}
	if err := send(Event{ID: after, Type: EventReady, Time: time.Now().UTC()}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			if err := send(toEvent(ev)); err != nil {
				return err
			}
		}
	}
}

// feedTypes are the types of other kinds' events FollowAll carries: each
// kind's state changes, as their producers name them (an agent task's
// "task_state", a capability run's "agent_run", a kept sandbox's
// "session_state"); their output stays on their own streams.
var feedTypes = []string{"task_state", "agent_run", "session_state"}

// inFeed reports whether FollowAll carries env: a job's status event, or
// another kind's state change.
func inFeed(env queue.Envelope) bool {
	if env.Kind == job.EventKind {
		return env.Type == job.EventStatus
	}
	return slices.Contains(feedTypes, env.Type)
}

// FromNow is FollowAll's after for a client with no event id: the feed
// starts at the stream's last event. A client that saw the ready event of
// an empty stream (id 0) resumes with 0 and misses nothing since.
const FromNow = ^uint64(0)
