package jobs

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

// TestEventWireJSON: an envelope off the bus becomes the flat object the
// doors have always sent: a job's event with the job's fields decoded from
// its payload (output as text, with base64 when it is not UTF-8; egress
// as the decision), another kind's with id, type and time followed by its
// producer's fields as written, the ready event with id, type and time.
func TestEventWireJSON(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	seq := func(kind, id, typ, payload string) queue.Sequenced {
		return queue.Sequenced{Seq: 7, Envelope: queue.Envelope{Time: at, Kind: kind, ID: id, Type: typ, Payload: json.RawMessage(payload)}}
	}
	tests := []struct {
		name string
		in   Event
		want string
	}{
		{"status", toEvent(seq("job", "job_a", "status", `{"status":"running","attempt":2}`)),
			`{"id":7,"type":"status","job_id":"job_a","status":"running","attempt":2,"time":"2026-11-27T09:00:00Z"}`},
		{"stdout", toEvent(seq("job", "job_a", "stdout", `{"data":"aGk="}`)),
			`{"id":7,"type":"stdout","job_id":"job_a","text":"hi","time":"2026-11-27T09:00:00Z"}`},
		{"stdout not utf-8", toEvent(seq("job", "job_a", "stderr", `{"data":"/w=="}`)),
			`{"id":7,"type":"stderr","job_id":"job_a","text":"\ufffd","base64":"/w==","time":"2026-11-27T09:00:00Z"}`},
		{"egress", toEvent(seq("job", "job_a", "egress", `{"egress":{"host":"example.com","allowed":false}}`)),
			`{"id":7,"type":"egress","job_id":"job_a","time":"2026-11-27T09:00:00Z","egress":{"host":"example.com","allowed":false}}`},
		{"task state", toEvent(seq("task", "t.1", "task_state", `{"task_id":"t.1","state":"running"}`)),
			`{"id":7,"type":"task_state","time":"2026-11-27T09:00:00Z","task_id":"t.1","state":"running"}`},
		{"payload with spaces", toEvent(seq("agent_run", "r", "agent_run", ` { "run_id" : "r" } `)),
			`{"id":7,"type":"agent_run","time":"2026-11-27T09:00:00Z","run_id":"r"}`},
		{"empty payload", toEvent(seq("task", "t", "x", `{}`)),
			`{"id":7,"type":"x","time":"2026-11-27T09:00:00Z"}`},
		{"no object", toEvent(seq("task", "t", "x", `[1]`)),
			`{"id":7,"type":"x","time":"2026-11-27T09:00:00Z"}`},
		{"ready", Event{ID: 3, Type: EventReady, Time: at},
			`{"id":3,"type":"ready","time":"2026-11-27T09:00:00Z"}`},
		{"recorded", Event{Type: job.EventStatus, JobID: "job_a", Status: job.StatusCompleted, Time: at},
			`{"id":0,"type":"status","job_id":"job_a","status":"completed","time":"2026-11-27T09:00:00Z"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.in)
		if err != nil || string(b) != tt.want {
			t.Errorf("%s: json.Marshal = %s, %v; want %s", tt.name, b, err, tt.want)
		}
		if !json.Valid(b) {
			t.Errorf("%s: %s is not valid JSON", tt.name, b)
		}
	}
}
