package runner_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// TestStepStartedAndPty: Step.Started gets the recorded run id and the
// running process (whose pid the process itself prints); Step.Pty runs
// it on a terminal of that size, whose output is the captured stdout. A
// denied run never calls Started.
func TestStepStartedAndPty(t *testing.T) {
	f := newFixture(t, nil)
	sb := openSandbox(t, f, runner.SandboxSpec{ID: "t2.sandbox"})
	var runID string
	var proc backend.Process
	step := &runner.Step{
		Sandbox: sb,
		Pty:     &backend.Terminal{Cols: 91, Rows: 17},
		Started: func(id string, p backend.Process) { runID, proc = id, p },
	}
	res, err := f.r.Step(context.Background(), stepRequest(f.ws, "t2.proc-1",
		[]string{"sh", "-c", `stty size; echo "pid $$"`}, "sh"), runner.Options{Step: step})
	if err != nil || res.Status != job.StatusCompleted {
		t.Fatalf("step = %s %+v, %v", res.Status, res.Error, err)
	}
	if runID != res.JobID || proc == nil {
		t.Fatalf("Started got run %q, process %v; want %s and the process", runID, proc, res.JobID)
	}
	want := "17 91\r\npid " + strconv.Itoa(proc.ID()) + "\r\n"
	if res.Stdout.Text != want {
		t.Errorf("stdout = %q, want %q (the terminal's, with the pid Started got)", res.Stdout.Text, want)
	}
	runID, proc = "", nil
	denied, err := f.r.Step(context.Background(), stepRequest(f.ws, "t2.proc-2", []string{"ls"}, "sh"), runner.Options{Step: step})
	if err != nil || denied.Status != job.StatusPolicyDenied || runID != "" || proc != nil {
		t.Errorf("denied step = %s, %v, Started got %q; want policy_denied and no Started", denied.Status, err, runID)
	}
}
