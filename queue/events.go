package queue

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-runner/agent-runner/job"
)

// Envelope is one event on the bus: what happened (Type) to which thing
// (Kind, ID), when, and the producer's Payload. The queue knows no
// payload: each producer owns its type (job events in package job, task
// events in the task domain, capability-run progress in its service), and
// a door that does not know a kind passes its payload through.
type Envelope struct {
	Time time.Time `json:"time"`
	// Kind is the sort of thing the event is about ("job", "task",
	// "agent_run"): one subject token.
	Kind string `json:"kind"`
	// ID is the job, task or run id; it may hold dots.
	ID   string `json:"id"`
	Type string `json:"type"`
	// Payload is the producer's JSON object (none when empty).
	Payload json.RawMessage `json:"payload,omitempty"`
}

type natsMsg = nats.Msg

// Sequenced is an envelope with its stream sequence, usable as an SSE id.
type Sequenced struct {
	Seq uint64
	Envelope
}

// Subject is the events subject of kind and id: ar.events.<kind>.<id>.
func Subject(kind, id string) string { return eventsPrefix + kind + "." + id }

// kindSubjects are the events subjects of every id of kind.
func kindSubjects(kind string) string { return eventsPrefix + kind + ".>" }

// NewEnvelope is an event of kind about id with payload encoded as JSON
// (nil for none), at the current time.
func NewEnvelope(kind, id, typ string, payload any) (Envelope, error) {
	env := Envelope{Time: time.Now().UTC(), Kind: kind, ID: id, Type: typ}
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return Envelope{}, job.Wrap(job.CodeInternal, err, "cannot encode an event payload")
		}
		env.Payload = b
	}
	return env, nil
}

// Publish sends an event of kind about id (payload as in NewEnvelope)
// without waiting for the stream's ack (see Send).
func (q *Queue) Publish(kind, id, typ string, payload any) error {
	env, err := NewEnvelope(kind, id, typ, payload)
	if err != nil {
		return err
	}
	return q.Send(env)
}

// Send sends env on its subject without waiting for the stream's ack
// (events are small and ordered per publisher; loss only affects live
// viewers, never a record). A zero Time is set to now.
func (q *Queue) Send(env Envelope) error {
	if env.Kind == "" || env.ID == "" || env.Type == "" {
		return job.Errorf(job.CodeInvalidRequest, "an event needs a kind, an id and a type")
	}
	if env.Time.IsZero() {
		env.Time = time.Now().UTC()
	}
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	_, err = q.js.PublishAsync(Subject(env.Kind, env.ID), b)
	return err
}

// Flush waits for pending asynchronous publishes.
func (q *Queue) Flush(ctx context.Context) {
	select {
	case <-q.js.PublishAsyncComplete():
	case <-ctx.Done():
	}
}

// Events streams the events of kind about id with sequence greater than
// after, until ctx ends. The channel is closed when ctx is done.
func (q *Queue) Events(ctx context.Context, kind, id string, after uint64) (<-chan Sequenced, error) {
	return q.follow(ctx, []string{Subject(kind, id)}, after, func(Envelope) bool { return true })
}

// follow streams the events on subjects with sequence greater than after
// that keep accepts, in stream order, until ctx ends; the channel is then
// closed. The consumer exists when follow returns, so nothing published
// afterwards is missed.
func (q *Queue) follow(ctx context.Context, subjects []string, after uint64, keep func(Envelope) bool) (<-chan Sequenced, error) {
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
			var env Envelope
			if json.Unmarshal(msg.Data(), &env) != nil || !keep(env) {
				continue
			}
			select {
			case out <- Sequenced{Seq: meta.Sequence.Stream, Envelope: env}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// Watch delivers the events of kind published from now on (about id
// only, unless id is empty) to fn, on the connection's delivery
// goroutine, until stop is called. The subscription is in place on the
// server when Watch returns: a record checked afterwards cannot miss an
// event published in between (by another connection: a remote worker, a
// record mirror). Watching does not replay and is not ordered with
// Events' sequences: it tells a waiter when to look again.
func (q *Queue) Watch(ctx context.Context, kind, id string, fn func(Envelope)) (stop func(), err error) {
	subject := kindSubjects(kind)
	if id != "" {
		subject = Subject(kind, id)
	}
	sub, err := q.nc.Subscribe(subject, func(m *natsMsg) {
		var env Envelope
		if json.Unmarshal(m.Data, &env) == nil && env.Kind == kind && m.Subject == Subject(env.Kind, env.ID) {
			fn(env)
		}
	})
	if err != nil {
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot watch events")
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := q.nc.FlushWithContext(fctx); err != nil && ctx.Err() == nil {
		sub.Unsubscribe()
		return nil, job.Wrap(job.CodeQueueClosed, err, "cannot watch events")
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// LastEventSeq is the sequence of the newest event in the events stream
// (0 when it never had one): AllEvents after it delivers only what is
// published from now on.
func (q *Queue) LastEventSeq(ctx context.Context) (uint64, error) {
	// Events this process sent are not waited for (Send); wait for them
	// here, so a follower that starts after the last one counts it as
	// sent (else it would arrive later, as if live).
	select {
	case <-q.js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, job.Wrap(job.CodeQueueClosed, ctx.Err(), "cannot read the events stream")
	}
	info, err := q.events.Info(ctx)
	if err != nil {
		return 0, job.Wrap(job.CodeQueueClosed, err, "cannot read the events stream")
	}
	return info.State.LastSeq, nil
}

// AllEvents streams the events of every kind with sequence greater than
// after (all the stream holds when 0), in stream order, until ctx ends;
// the channel is then closed. With keep, only the events it accepts are
// delivered (lists of everything's state leave out every job's output
// chunks); sequences skip the events left out.
func (q *Queue) AllEvents(ctx context.Context, after uint64, keep func(Envelope) bool) (<-chan Sequenced, error) {
	if keep == nil {
		keep = func(Envelope) bool { return true }
	}
	return q.follow(ctx, []string{eventsPrefix + ">"}, after, keep)
}
