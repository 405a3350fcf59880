package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

func stepRunner(t *testing.T) *runner.Runner {
	t.Helper()
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestStepRunsAreLinked: a task's agent and collection are runs of the
// run service, linked from metadata.json.
func TestStepRunsAreLinked(t *testing.T) {
	dir, tk, doc := submit(t, `echo changed > a.txt`, "")
	r := stepRunner(t)
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: tasktest.Backend(t), CloneBackoff: &quick, Runner: r})
	if err != nil || md.State != state.Completed {
		t.Fatalf("task = %s %+v, %v", md.State, md.Error, err)
	}
	want := map[string]string{"agent": "task-lc.agent", "collect": "task-lc.collect"}
	if diff := cmp.Diff(want, md.StepRuns); diff != "" {
		t.Errorf("step_runs (-want +got):\n%s", diff)
	}
	stored, ok := lifecycle.ReadMetadata(dir)
	if !ok || !cmp.Equal(stored.StepRuns, want) {
		t.Errorf("metadata.json step_runs = %v, want %v", stored.StepRuns, want)
	}
	for _, id := range want {
		if res, err := r.Store().ReadResult(id); err != nil || res.Status != job.StatusCompleted {
			t.Errorf("run %s = %s, %v; want completed", id, res.Status, err)
		}
	}
}

// TestPolicyDeniedTaskFails: a task whose agent command the operator's
// task policy denies ends failed before its agent runs, with the
// policy's code in its error and the denial in the agent step's record.
func TestPolicyDeniedTaskFails(t *testing.T) {
	dir, tk, doc := submit(t, `echo ran > ran.txt`, "lifecycle: {failure_action: preserve}\n")
	r := stepRunner(t)
	pol := &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "claude"}}, AllowShell: true}
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: tasktest.Backend(t), CloneBackoff: &quick, Runner: r, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	if md.State != state.Failed || md.Error == nil || md.Error.Code != job.CodeCommandDenied {
		t.Fatalf("denied task = %s %+v, want failed with %s", md.State, md.Error, job.CodeCommandDenied)
	}
	if _, err := os.Stat(filepath.Join(dir, "inbox", "ran.txt")); err == nil {
		t.Errorf("the denied agent ran")
	}
	id := md.StepRuns["agent"]
	res, err := r.Store().ReadResult(id)
	if err != nil || res.Status != job.StatusPolicyDenied || res.Error == nil || res.Error.Message != md.Error.Message {
		t.Errorf("agent run %q = %+v, %v; want policy_denied with the task's error %q", id, res.Error, err, md.Error.Message)
	}
	rec, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Current(); got.State != state.Failed || got.Error == nil || got.Error.Code != job.CodeCommandDenied {
		t.Errorf("state.json = %s %+v, want failed with %s", got.State, got.Error, job.CodeCommandDenied)
	}
}
