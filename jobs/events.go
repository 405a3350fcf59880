package jobs

import (
	"context"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

// EventReady is the first event of FollowAll: the stream is in place,
// and everything after its ID will be delivered. A client reads its lists
// after it (not before), so no change falls between the two.
const EventReady = "ready"

// Event is one live job event as every door sends it (SSE data line,
// WebSocket message); FollowAll also sends agent tasks' state changes
// (type queue.EventTaskState, TaskID and State set, JobID empty),
// capability runs' progress (type queue.EventAgentRun, RunID set, JobID
// empty) and EventReady.
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
	// TaskID and State are an agent task's state change (type
	// "task_state").
	TaskID string `json:"task_id,omitempty"`
	State  string `json:"state,omitempty"`
	// RunID, Calls, Denied, Tool, Allowed and ExitReason are a capability
	// run's progress (type "agent_run", Status the run's status): see
	// queue.Event.
	RunID      string `json:"run_id,omitempty"`
	Calls      int64  `json:"calls,omitempty"`
	Denied     int    `json:"denied,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Allowed    *bool  `json:"allowed,omitempty"`
	ExitReason string `json:"exit_reason,omitempty"`
}

func toEvent(ev queue.Sequenced) Event {
	out := Event{ID: ev.Seq, Type: ev.Type, JobID: ev.JobID, Status: ev.Status, Attempt: ev.Attempt, Time: ev.Time, TaskID: ev.TaskID, State: ev.State,
		RunID: ev.RunID, Calls: ev.Calls, Denied: ev.Denied, Tool: ev.Tool, Allowed: ev.Allowed, ExitReason: ev.ExitReason}
	if ev.Type == queue.EventEgress {
		out.Egress = json.RawMessage(ev.Data)
		return out
	}
	if len(ev.Data) > 0 {
		out.Text = string(ev.Data)
		if !utf8.Valid(ev.Data) {
			out.Base64 = ev.Data
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
	events, err := s.cfg.Queue.Events(ctx, id, lastID)
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
			if ev.Type == queue.EventStatus && ev.Status.Terminal() {
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
				return send(Event{Type: queue.EventStatus, JobID: id, Status: res.Status, Attempt: res.Attempt, Time: res.EndedAt})
			}
			idle.Reset(time.Second)
		}
	}
}

func sendRecorded(res job.Result, send func(Event) error) error {
	for _, out := range []struct {
		typ string
		o   job.Output
	}{{queue.EventStdout, res.Stdout}, {queue.EventStderr, res.Stderr}} {
		if out.o.Text != "" {
			if err := send(Event{Type: out.typ, JobID: res.JobID, Text: out.o.Text, Time: res.EndedAt}); err != nil {
				return err
			}
		}
	}
	return send(Event{Type: queue.EventStatus, JobID: res.JobID, Status: res.Status, Attempt: res.Attempt, Time: res.EndedAt})
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
	events, err := q.AllEvents(ctx, after, queue.EventStatus, queue.EventTaskState, queue.EventAgentRun)
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

// FromNow is FollowAll's after for a client with no event id: the feed
// starts at the stream's last event. A client that saw the ready event of
// an empty stream (id 0) resumes with 0 and misses nothing since.
const FromNow = ^uint64(0)
