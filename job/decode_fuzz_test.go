package job_test

import (
	"encoding/json"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/validation"
)

func FuzzDecodeRequest(f *testing.F) {
	seeds := []string{
		`{"workspace":{"path":"."},"command":{"argv":["true"]}}`,
		`{"trace":{"trace_id":"t","x":[1,{"y":null}]},"workspace":{"path":"/tmp","include":["src/**"]},"command":{"argv":["python3","-m","pytest"],"cwd":"a/../b","env":{"A":"1"}},"policy":{"allowed_commands":["python3",{"basename":"git","path":"/usr/bin/git","sha256":"00"}],"allowed_env":["A"],"artifact_globs":["*.xml"]},"limits":{"timeout_ms":1000},"backend":{"kind":"local-process"}}`,
		`{"command":{"argv":[],"cwd":"../../etc"}}`,
		`{"trace":[1,2]}`,
		`{"workspace":{"path":"."},"command":{"argv":["x"]}} trailing`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := job.DecodeRequest(data)
		if err != nil {
			if job.CodeOf(err) != job.CodeInvalidRequest {
				t.Fatalf("decode error code = %q, want %q", job.CodeOf(err), job.CodeInvalidRequest)
			}
			return
		}
		// Encoding a decoded request and decoding it again is stable.
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("marshal decoded request: %v", err)
		}
		again, err := job.DecodeRequest(b)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", b, err)
		}
		if job.RequestSHA256(*again) != job.RequestSHA256(*req) {
			t.Fatalf("round trip changed the request hash:\n%s", b)
		}
		// Validation never panics and only returns validation codes.
		if err := validation.Request(req, validation.Config{DefaultBackend: "local_process"}); err != nil {
			if c := job.CodeOf(err); c.Class() != "validation" {
				t.Fatalf("validation returned %q", c)
			}
		}
	})
}
