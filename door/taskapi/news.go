package taskapi

import (
	"context"
	"time"
)

// Events tells a task's streams when the task's records may have
// changed: serve passes its event bus (taskevent.Watcher), on which a task
// publishes its state changes, output and heartbeats after writing them,
// and the record mirror what it wrote of a task running on another host.
type Events interface {
	// Watch calls wake on each event of task id from now on, until stop.
	// The watch is in place when it returns, so a record read afterwards
	// misses no event published in between.
	Watch(ctx context.Context, id string, wake func()) (stop func(), err error)
}

// Option configures the task API's routes.
type Option func(*api)

// WithEvents makes the task streams wake on e's events and read the
// records only then (and every recheckEvery, in case an event was lost),
// instead of every streamPoll.
func WithEvents(e Events) Option { return func(a *api) { a.events = e } }

// streamPoll is how often a stream reads a live task's records when the
// API has no events to wake on (Routes without WithEvents).
const streamPoll = 100 * time.Millisecond

// recheckEvery is how often a stream that wakes on events reads the
// records without one: a lost event delays a viewer by this much at
// worst, and never strands it.
const recheckEvery = 15 * time.Second

// news is one stream's wake-ups: events of its task, and a timer.
type news struct {
	ch   chan struct{}
	tick *time.Ticker
	stop func()
}

// watch starts the wake-ups of a stream of task id.
func (a *api) watch(ctx context.Context, id string) (*news, error) {
	n := &news{ch: make(chan struct{}, 1), stop: func() {}}
	if a.events == nil {
		n.tick = time.NewTicker(streamPoll)
		return n, nil
	}
	stop, err := a.events.Watch(ctx, id, func() {
		select {
		case n.ch <- struct{}{}:
		default: // a wake-up is pending already
		}
	})
	if err != nil {
		return nil, err
	}
	n.stop, n.tick = stop, time.NewTicker(recheckEvery)
	return n, nil
}

// wait returns when the records may have news (true) or ctx ends (false).
func (n *news) wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-n.ch:
		return true
	case <-n.tick.C:
		return true
	}
}

func (n *news) close() {
	n.tick.Stop()
	n.stop()
}
