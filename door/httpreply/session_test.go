package httpreply

import (
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// TestSessionStatuses: the sessions codes' statuses (docs/sessions.md).
func TestSessionStatuses(t *testing.T) {
	for code, want := range map[job.Code]int{
		job.CodeSessionNotRunning: 409, job.CodeSessionLimit: 429,
		job.CodeDirectoryNotEmpty: 409, job.CodeRangeNotSatisfiable: 416,
		job.CodeSessionPortUnreachable: 502, job.CodeSessionWorkerLost: 410,
	} {
		if got := Status(code); got != want {
			t.Errorf("Status(%q) = %d, want %d", code, got, want)
		}
	}
}
