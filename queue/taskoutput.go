package queue

import (
	"encoding/json"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// Task output event types: a chunk of an agent task's scrubbed output
// (TaskID, Data), on ar.taskevents.<task_id> beside its state changes.
const (
	EventTaskStdout = "task_stdout"
	EventTaskStderr = "task_stderr"
	// EventTaskMetrics is one heartbeat line (progress, CPU, memory).
	EventTaskMetrics = "task_metrics"
)

// PublishTaskOutput sends a chunk of a task's output ("stdout" or
// "stderr", or a heartbeat line: "metrics") without waiting for the stream's ack: a worker running a task
// for another host's API node streams it live this way (the task's
// record, with the whole logs, follows when it ends).
func (q *Queue) PublishTaskOutput(taskID, stream string, p []byte) error {
	typ := EventTaskStdout
	switch stream {
	case "stderr":
		typ = EventTaskStderr
	case "metrics":
		typ = EventTaskMetrics
	}
	if taskID == "" {
		return job.Errorf(job.CodeInvalidRequest, "a task event needs a task id")
	}
	b, err := json.Marshal(Event{Type: typ, TaskID: taskID, Data: p, Time: time.Now().UTC()})
	if err != nil {
		return err
	}
	_, err = q.js.PublishAsync(taskEventsPrefix+taskID, b)
	return err
}
