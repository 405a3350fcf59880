package queue

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// PublishTaskEvent sends an agent task's state change (ev.Type is set to
// EventTaskState) on ar.taskevents.<task_id>, without waiting for the
// stream's ack: like job status events, it only feeds live viewers; the
// task's own record is the truth.
func (q *Queue) PublishTaskEvent(ev Event) error {
	if ev.TaskID == "" {
		return job.Errorf(job.CodeInvalidRequest, "a task event needs a task id")
	}
	ev.Type = EventTaskState
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = q.js.PublishAsync(taskEventsPrefix+ev.TaskID, b)
	return err
}

// LastEventSeq is the sequence of the newest event in the events stream
// (0 when it never had one): AllEvents after it delivers only what is
// published from now on.
func (q *Queue) LastEventSeq(ctx context.Context) (uint64, error) {
	info, err := q.events.Info(ctx)
	if err != nil {
		return 0, job.Wrap(job.CodeQueueClosed, err, "cannot read the events stream")
	}
	return info.State.LastSeq, nil
}

// PublishAgentRunEvent sends a capability run's progress (ev.Type is set
// to EventAgentRun) on ar.agentevents.<run_id>, without waiting for the
// stream's ack: it feeds live viewers; the run's directory is the truth.
func (q *Queue) PublishAgentRunEvent(ev Event) error {
	if ev.RunID == "" {
		return job.Errorf(job.CodeInvalidRequest, "an agent run event needs a run id")
	}
	ev.Type = EventAgentRun
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = q.js.PublishAsync(agentEventsPrefix+ev.RunID, b)
	return err
}

// AllEvents streams the events of every job, task and capability run with
// sequence greater than after (all the stream holds when 0), in stream
// order, until ctx ends; the channel is then closed. With types, only
// events of those types are delivered (EventStatus, EventTaskState and
// EventAgentRun for lists of everything's state; output chunks of every
// job are many). Sequences skip the events left out.
func (q *Queue) AllEvents(ctx context.Context, after uint64, types ...string) (<-chan Sequenced, error) {
	keep := func(Event) bool { return true }
	if len(types) > 0 {
		keep = func(ev Event) bool { return slices.Contains(types, ev.Type) }
	}
	return q.follow(ctx, []string{eventsPrefix + ">", taskEventsPrefix + ">", agentEventsPrefix + ">"}, after, keep)
}
