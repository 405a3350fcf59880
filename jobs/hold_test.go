package jobs_test

import (
	"context"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// TestHoldRefusesAWorkspaceBeforeAnyRecord: a door's hold check (serve:
// capability runs' live write roots) refuses the submit, and nothing is
// recorded.
func TestHoldRefusesAWorkspaceBeforeAnyRecord(t *testing.T) {
	svc, ws := openPlane(t)
	var seen string
	svc.Hold(func(path string) error {
		seen = path
		return job.Errorf(job.CodePathEscape, "held")
	})
	req := request("job_held-1", ws, "echo", "x")
	if _, _, err := svc.Submit(context.Background(), &req); job.CodeOf(err) != job.CodePathEscape {
		t.Fatalf("Submit of a held workspace = %v, want %s", err, job.CodePathEscape)
	}
	if seen != ws {
		t.Errorf("the check saw %q, want the workspace %q", seen, ws)
	}
	if svc.Store().Exists("job_held-1") {
		t.Error("a refused submit left a record")
	}
}
