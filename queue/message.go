package queue

import (
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
	// CacheNamespace is the namespace of the job's workspace.caches, its
	// caller's (package buildcache), and SharedCaches the names of them
	// the operator shares across callers: set by the door that accepted
	// the job (jobs.Service), never by the request.
	CacheNamespace string   `json:"cache_namespace,omitempty"`
	SharedCaches   []string `json:"shared_caches,omitempty"`
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
	var m struct {
		Request        *job.Request `json:"request"`
		Mounts         *Mounts      `json:"mounts"`
		CacheNamespace string       `json:"cache_namespace"`
		SharedCaches   []string     `json:"shared_caches"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Message{}, job.Wrap(job.CodeInvalidRequest, err, "undecodable job message")
	}
	if m.Request != nil {
		return Message{Request: *m.Request, Mounts: m.Mounts, CacheNamespace: m.CacheNamespace, SharedCaches: m.SharedCaches}, nil
	}
	var req job.Request
	if err := json.Unmarshal(b, &req); err != nil {
		return Message{}, job.Wrap(job.CodeInvalidRequest, err, "undecodable job message")
	}
	return Message{Request: req}, nil
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
