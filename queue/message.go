package queue

import (
	"bytes"
	"encoding/json"

	"github.com/agent-runner/agent-runner/job"
)

// Message is a queued job as published on ar.jobs.<job_id>.
type Message struct {
	Request job.Request `json:"request"`
	// Mounts are host directories an in-process door (a capability
	// session's read and write roots) exposes to the job. No JSON door
	// can set them: the HTTP and MCP doors publish requests only.
	Mounts *Mounts `json:"mounts,omitempty"`
}

// Mounts are runner.Options' library-only directories, carried over the
// queue.
type Mounts struct {
	ReadOnly []string `json:"read_only,omitempty"`
	Writable []string `json:"writable,omitempty"`
}

// DecodeMessage reads a job message. A bare job request (the message of
// earlier versions, still queued after an upgrade) is accepted too.
func DecodeMessage(b []byte) (Message, error) {
	var probe struct {
		Request json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return Message{}, job.Wrap(job.CodeInvalidRequest, err, "undecodable job message")
	}
	if len(bytes.TrimSpace(probe.Request)) == 0 {
		var req job.Request
		if err := json.Unmarshal(b, &req); err != nil {
			return Message{}, job.Wrap(job.CodeInvalidRequest, err, "undecodable job message")
		}
		return Message{Request: req}, nil
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return Message{}, job.Wrap(job.CodeInvalidRequest, err, "undecodable job message")
	}
	return m, nil
}

// GetReadOnly is m's read-only directories (none for a nil m).
func (m *Mounts) GetReadOnly() []string {
	if m == nil {
		return nil
	}
	return m.ReadOnly
}

// GetWritable is m's writable directories (none for a nil m).
func (m *Mounts) GetWritable() []string {
	if m == nil {
		return nil
	}
	return m.Writable
}
