package runner_test

import (
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// TestExecScopeFailsClosed: local_process cannot confine what its
// workload execs, so a job asking for exec_scope every_process ends
// backend_unavailable without running, and says why.
func TestExecScopeFailsClosed(t *testing.T) {
	f := newFixture(t, nil)
	req := f.request([]string{"sh", "-c", "echo ran"}, "sh")
	req.Policy.AllowShell, req.Policy.ExecScope = true, job.ExecScopeEveryProcess
	res := f.run(req)
	if res.Status != job.StatusBackendUnavailable || job.CodeOf(res.Error) != job.CodeBackendUnavail {
		t.Fatalf("status = %s (%+v), want %s with %s", res.Status, res.Error, job.StatusBackendUnavailable, job.CodeBackendUnavail)
	}
	if !strings.Contains(res.Error.Message, "exec_scope every_process") {
		t.Errorf("error message = %q, want it to name exec_scope every_process", res.Error.Message)
	}
	if strings.Contains(res.Stdout.Text, "ran") {
		t.Errorf("the job ran unconfined: %q", res.Stdout.Text)
	}

	req.Policy.ExecScope = job.ExecScopeArgv0
	if res := f.run(req); res.Status != job.StatusCompleted {
		t.Errorf("exec_scope argv0 on local_process: status = %s (%+v), want %s", res.Status, res.Error, job.StatusCompleted)
	}
}
