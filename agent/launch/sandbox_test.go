package launch

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// sandboxSession opens a session whose subprocess tools run on
// local_process in r, over a read root "proj" with /usr/bin/true
// allowed and max_memory_mb 512.
func sandboxSession(t *testing.T, r *runner.Runner) *Session {
	t.Helper()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "proj"), 0o755)
	m := filepath.Join(dir, "m.yaml")
	os.WriteFile(m, []byte("name: t\ncapabilities:\n  tools: [run_tests]\n  filesystem: {read: [proj]}\n  commands: {allow: [/usr/bin/true]}\nlimits: {max_memory_mb: 512}\n"), 0o644)
	s, err := Open(context.Background(), m, ModeScripted, Options{RunsDir: filepath.Join(dir, "runs"), Cwd: dir, Runner: r, Backend: "local_process"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

var trueCall = json.RawMessage(`{"command":"/usr/bin/true","working_directory":"proj"}`)

// TestToolCallsHeldToTheOperatorsLimits: a call whose manifest asks for
// more memory than the operator's maximum is refused as a job would be
// (validation.limit_exceeded), and no sandbox is opened for it.
func TestToolCallsHeldToTheOperatorsLimits(t *testing.T) {
	r, err := runner.New(runner.Config{StoreDir: t.TempDir(), DefaultBackend: "local_process", Max: job.Limits{MemoryMB: 256}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := sandboxSession(t, r)
	if _, err := s.Call(context.Background(), "run_tests", trueCall); job.CodeOf(err) != job.CodeLimitExceeded {
		t.Fatalf("call = %v, want %s", err, job.CodeLimitExceeded)
	}
	if s.tools.sb != nil {
		t.Errorf("a sandbox was opened for a refused call")
	}
}

// TestCallsAfterCloseRunNothing: once the run's sandbox is closed, a
// call fails run.canceled and records nothing; the first calls ran in
// the sandbox and were recorded under the run's ids.
func TestCallsAfterCloseRunNothing(t *testing.T) {
	r, err := runner.New(runner.Config{StoreDir: t.TempDir(), DefaultBackend: "local_process"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := sandboxSession(t, r)
	out, err := s.Call(context.Background(), "run_tests", trueCall)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		JobID   string `json:"job_id"`
		Status  string `json:"status"`
		Sandbox string `json:"sandbox"`
	}
	json.Unmarshal(out, &res)
	if res.Status != string(job.StatusCompleted) || res.JobID != s.ID+".call-1" || res.Sandbox != s.ID+".sandbox" {
		t.Errorf("call 1 = %+v, want completed as %s.call-1 in %s.sandbox", res, s.ID, s.ID)
	}
	s.Close()
	if _, err := s.Call(context.Background(), "run_tests", trueCall); job.CodeOf(err) != job.CodeRunCanceled {
		t.Errorf("call after Close = %v, want %s", err, job.CodeRunCanceled)
	}
	if _, err := r.Store().ReadStatus(s.ID + ".call-2"); err == nil {
		t.Errorf("the call after Close has a record")
	}
}
