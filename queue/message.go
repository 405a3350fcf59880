package queue

import (
	"encoding/json"

	"github.com/agent-runner/agent-runner/job"
)

// Message is a queued job as published on ar.jobs.<job_id>.
type Message struct {
	Request job.Request `json:"request"`
	// CacheNamespace is the namespace of the job's workspace.caches, its
	// caller's (package buildcache), and SharedCaches the names of them
	// the operator shares across callers: set by the door that accepted
	// the job (jobs.Service), never by the request.
	CacheNamespace string   `json:"cache_namespace,omitempty"`
	SharedCaches   []string `json:"shared_caches,omitempty"`
}

// DecodeMessage reads a job message. A bare job request (the message of
// earlier versions, still queued after an upgrade) is accepted too. A
// message carries no host directories: a "mounts" field (which earlier
// versions took from in-process doors) is ignored, so nothing on the
// queue can mount a host path into a job.
func DecodeMessage(b []byte) (Message, error) {
	var m struct {
		Request        *job.Request `json:"request"`
		CacheNamespace string       `json:"cache_namespace"`
		SharedCaches   []string     `json:"shared_caches"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Message{}, job.Wrap(job.CodeInvalidRequest, err, "undecodable job message")
	}
	if m.Request != nil {
		return Message{Request: *m.Request, CacheNamespace: m.CacheNamespace, SharedCaches: m.SharedCaches}, nil
	}
	var req job.Request
	if err := json.Unmarshal(b, &req); err != nil {
		return Message{}, job.Wrap(job.CodeInvalidRequest, err, "undecodable job message")
	}
	return Message{Request: req}, nil
}
