package queue

import (
	"encoding/json"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

func TestDecodeMessage(t *testing.T) {
	req := job.Request{JobID: "job_m", Command: job.Command{Argv: []string{"true"}}}
	bare, _ := json.Marshal(req)
	wrapped, _ := json.Marshal(Message{Request: req, CacheNamespace: "ns"})
	// An earlier version's message could carry host directories to mount;
	// they are no part of a message now, and decoding drops them.
	withMounts := []byte(`{"request":` + string(bare) + `,"mounts":{"read_only":["/srv/ro"],"writable":["/etc"]}}`)
	for _, tt := range []struct {
		name string
		in   []byte
		want Message
	}{
		{"a message", wrapped, Message{Request: req, CacheNamespace: "ns"}},
		{"a message of an earlier version with mounts", withMounts, Message{Request: req}},
		{"a bare request (queued by an earlier version)", bare, Message{Request: req}},
	} {
		m, err := DecodeMessage(tt.in)
		if err != nil || m.Request.JobID != "job_m" || len(m.Request.Command.Argv) != 1 {
			t.Errorf("%s: DecodeMessage = %+v, %v; want job_m", tt.name, m, err)
			continue
		}
		if got, _ := json.Marshal(m); string(got) != string(must(json.Marshal(tt.want))) {
			t.Errorf("%s: DecodeMessage = %s, want %s", tt.name, got, must(json.Marshal(tt.want)))
		}
	}
	if _, err := DecodeMessage([]byte("{not json")); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("DecodeMessage(garbage) = %v, want %s", err, job.CodeInvalidRequest)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
