package queue

import (
	"encoding/json"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

func TestDecodeMessage(t *testing.T) {
	req := job.Request{JobID: "job_m", Command: job.Command{Argv: []string{"true"}}}
	bare, _ := json.Marshal(req)
	wrapped, _ := json.Marshal(Message{Request: req, Mounts: &Mounts{ReadOnly: []string{"/srv/ro"}}})
	for _, tt := range []struct {
		name   string
		in     []byte
		mounts []string
	}{
		{"a message with mounts", wrapped, []string{"/srv/ro"}},
		{"a bare request (queued by an earlier version)", bare, nil},
	} {
		m, err := DecodeMessage(tt.in)
		if err != nil || m.Request.JobID != "job_m" || len(m.Request.Command.Argv) != 1 {
			t.Errorf("%s: DecodeMessage = %+v, %v; want job_m", tt.name, m, err)
			continue
		}
		if got := m.Mounts.GetReadOnly(); len(got) != len(tt.mounts) {
			t.Errorf("%s: read-only mounts = %v, want %v", tt.name, got, tt.mounts)
		}
	}
	if _, err := DecodeMessage([]byte("{not json")); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("DecodeMessage(garbage) = %v, want %s", err, job.CodeInvalidRequest)
	}
}
