// Package taskevent is an agent task's events on the event bus: the
// task kind, its event types and their payloads. The task domain owns
// them; the queue carries them in its envelope without knowing them, and
// doors that do not know the kind pass the payload through.
package taskevent

import (
	"context"

	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/task/state"
)

// Kind is the kind of a task's events (ar.events.task.<task_id>); the
// envelope's id is the task id.
const Kind = "task"

// Event types.
const (
	// TypeState is a state change (State payload): GET /v1/events and the
	// dashboard's lists follow it.
	TypeState = "task_state"
	// TypeStdout and TypeStderr are a chunk of the task's scrubbed output
	// (Output payload); TypeMetrics one heartbeat line (progress, CPU,
	// memory).
	TypeStdout  = "task_stdout"
	TypeStderr  = "task_stderr"
	TypeMetrics = "task_metrics"
	// TypeRecorded says the node that publishes it wrote to the task's
	// records (Recorded payload): a task stream there reads them again.
	TypeRecorded = "task_recorded"
)

// State is the payload of TypeState: the task and the state it entered
// (as package task/state names it). The envelope's time is the
// transition's.
type State struct {
	TaskID string `json:"task_id"`
	State  string `json:"state"`
}

// Output is the payload of TypeStdout, TypeStderr and TypeMetrics: the
// chunk's exact bytes (base64 in JSON).
type Output struct {
	TaskID string `json:"task_id"`
	Data   []byte `json:"data,omitempty"`
}

// Recorded is the payload of TypeRecorded: what of the task's records
// was written, "stdout", "stderr", "metrics" (a heartbeat), "state" (a
// state change) or "record" (the whole record, from the worker that ran
// the task).
type Recorded struct {
	TaskID string `json:"task_id"`
	Record string `json:"record"`
}

// OutputType is the event type of a chunk of stream: "stdout", "stderr",
// or a heartbeat line (agentstep.StreamMetrics, "metrics").
func OutputType(stream string) string {
	switch stream {
	case "stderr":
		return TypeStderr
	case "metrics":
		return TypeMetrics
	}
	return TypeStdout
}

// PublishState sends rec's state change, timed at its checkpoint, without
// waiting for the stream's ack: it feeds live viewers and API nodes; the
// task's own record is the truth.
func PublishState(q *queue.Queue, rec state.Record) error {
	env, err := queue.NewEnvelope(Kind, rec.TaskID, TypeState, State{TaskID: rec.TaskID, State: string(rec.State)})
	if err != nil {
		return err
	}
	if !rec.LastCheckpoint.IsZero() {
		env.Time = rec.LastCheckpoint
	}
	return q.Send(env)
}

// PublishOutput sends a chunk of taskID's stream (see OutputType) without
// waiting for the stream's ack; p is encoded before it returns.
func PublishOutput(q *queue.Queue, taskID, stream string, p []byte) error {
	return q.Publish(Kind, taskID, OutputType(stream), Output{TaskID: taskID, Data: p})
}

// PublishRecorded says that what of taskID's records was just written
// (see Recorded), without waiting for the stream's ack.
func PublishRecorded(q *queue.Queue, taskID, what string) error {
	return q.Publish(Kind, taskID, TypeRecorded, Recorded{TaskID: taskID, Record: what})
}

// Recorder is serve's lifecycle Output hook for the tasks it runs: each
// chunk of output and each heartbeat line, already in the task's records
// when the hook hears it, is announced (PublishRecorded, without the
// bytes), so the task's streams read them at once.
func Recorder(q *queue.Queue) func(taskID, stream string, p []byte) {
	return func(taskID, stream string, _ []byte) {
		_ = PublishRecorded(q, taskID, stream) // a lost one delays viewers, never the task
	}
}

// Watcher is the event bus as the wake-up of task streams
// (taskapi.Events): every event of a task wakes its streams.
type Watcher struct{ Q *queue.Queue }

// Watch calls wake on each event of task id from now on, until stop.
func (w Watcher) Watch(ctx context.Context, id string, wake func()) (stop func(), err error) {
	return w.Q.Watch(ctx, Kind, id, func(queue.Envelope) { wake() })
}
