package job

import "encoding/json"

// EventKind is the kind of a job's events on the event bus (its subject
// token and the envelope's kind); the envelope's id is the job id.
const EventKind = "job"

// Job event types.
const (
	EventStatus = "status"
	EventStdout = "stdout"
	EventStderr = "stderr"
	// EventEgress carries one egress gateway decision.
	EventEgress = "egress"
)

// EventPayload is the payload of a job's event on the bus: Status and
// Attempt on EventStatus, Data (the chunk's exact bytes; chunks are not
// guaranteed to end on UTF-8 boundaries, so they travel as base64) on
// EventStdout and EventStderr, Egress (the decision as JSON) on
// EventEgress. The doors turn it into the job stream's flat events.
type EventPayload struct {
	Status  Status          `json:"status,omitempty"`
	Attempt int             `json:"attempt,omitempty"`
	Data    []byte          `json:"data,omitempty"`
	Egress  json.RawMessage `json:"egress,omitempty"`
}

// DecodeEventPayload reads a job event's payload; an empty one is the
// zero payload.
func DecodeEventPayload(b []byte) (EventPayload, error) {
	var p EventPayload
	if len(b) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, Wrap(CodeInvalidRequest, err, "undecodable job event payload")
	}
	return p, nil
}
