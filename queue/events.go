package queue

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-runner/agent-runner/job"
)

type natsMsg = nats.Msg

// Event types.
const (
	EventStatus = "status"
	EventStdout = "stdout"
	EventStderr = "stderr"
	// EventEgress carries one egress gateway decision (egress.Decision
	// as JSON in Data).
	EventEgress = "egress"
	// EventTaskState is an agent task's state change (TaskID, State), on
	// ar.taskevents.<task_id>.
	EventTaskState = "task_state"
	// EventAgentRun is a capability run's progress (RunID, Status, Calls,
	// Denied; Tool and Allowed after a tool call), on
	// ar.agentevents.<run_id>.
	EventAgentRun = "agent_run"
)

// Event is one live job event, an agent task's state change, or a
// capability run's progress.
type Event struct {
	Type   string     `json:"type"`
	JobID  string     `json:"job_id,omitempty"`
	Status job.Status `json:"status,omitempty"`
	// Data is an output chunk; chunks are not guaranteed to end on UTF-8
	// boundaries, so they travel as bytes (base64 in JSON).
	Data    []byte    `json:"data,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Time    time.Time `json:"time"`
	// TaskID and State are set on EventTaskState (the task's state as
	// package task/state names it).
	TaskID string `json:"task_id,omitempty"`
	State  string `json:"state,omitempty"`
	// RunID, Calls (the tool calls used so far; after a call, its number)
	// and Denied (the calls denied so far) are set on EventAgentRun;
	// Status is then the run's status as package agentapi names it
	// (running, finished, interrupted). Tool and Allowed name the call an
	// event follows; ExitReason says how a finished run ended.
	RunID      string `json:"run_id,omitempty"`
	Calls      int64  `json:"calls,omitempty"`
	Denied     int    `json:"denied,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Allowed    *bool  `json:"allowed,omitempty"`
	ExitReason string `json:"exit_reason,omitempty"`
}

// Sequenced is an event with its stream sequence, usable as an SSE id.
type Sequenced struct {
	Seq uint64
	Event
}

// Publish sends an event without waiting for the stream's ack (status
// events are small and ordered per publisher; loss only affects live
// viewers, never the run record).
func (q *Queue) Publish(ev Event) error {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = q.js.PublishAsync(eventsPrefix+ev.JobID, b)
	return err
}

// Flush waits for pending asynchronous publishes.
func (q *Queue) Flush(ctx context.Context) {
	select {
	case <-q.js.PublishAsyncComplete():
	case <-ctx.Done():
	}
}

// Events streams the events of jobID with sequence greater than after,
// until ctx ends. The channel is closed when ctx is done.
func (q *Queue) Events(ctx context.Context, jobID string, after uint64) (<-chan Sequenced, error) {
	return q.follow(ctx, []string{eventsPrefix + jobID}, after, func(Event) bool { return true })
}

// follow streams the events on subjects with sequence greater than after
// that keep accepts, in stream order, until ctx ends; the channel is then
// closed. The consumer exists when follow returns, so nothing published
// afterwards is missed.
func (q *Queue) follow(ctx context.Context, subjects []string, after uint64, keep func(Event) bool) (<-chan Sequenced, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy}
	if after > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = after + 1
	}
	cons, err := q.js.OrderedConsumer(ctx, EventsStream, cfg)
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot follow events")
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot follow events")
	}
	out := make(chan Sequenced, 64)
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	go func() {
		defer close(out)
		for {
			msg, err := it.Next()
			if err != nil {
				return
			}
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			var ev Event
			if json.Unmarshal(msg.Data(), &ev) != nil || !keep(ev) {
				continue
			}
			select {
			case out <- Sequenced{Seq: meta.Sequence.Stream, Event: ev}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// WaitTerminal returns when a terminal status event for jobID is
// published, ctx ends, or done reports true (checked once the
// subscription is in place, so a result written just before is not
// missed).
func (q *Queue) WaitTerminal(ctx context.Context, jobID string, done func() bool) error {
	ch := make(chan *nats.Msg, 16)
	sub, err := q.nc.ChanSubscribe(eventsPrefix+jobID, ch)
	if err != nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot follow job events")
	}
	defer sub.Unsubscribe()
	// The subscription must be in place on the server before the record
	// is checked: a terminal event another connection (a remote worker, a
	// record mirror) publishes in between would otherwise be missed, and
	// the wait would run to its timeout.
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := q.nc.FlushWithContext(fctx); err != nil && ctx.Err() == nil {
		return job.Wrap(job.CodeQueueClosed, err, "cannot follow job events")
	}
	if done() {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-ch:
			var ev Event
			if json.Unmarshal(m.Data, &ev) == nil && ev.Type == EventStatus && ev.Status.Terminal() {
				return nil
			}
		}
	}
}
