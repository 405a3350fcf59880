package agentstep_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestAgentStepIsRecorded: the agent runs as runs/<task_id>.agent of the
// run service it is given, whose record holds the request (the task's
// command under its default policy, no secret), the allow decision and
// the scrubbed output's hashes.
func TestAgentStepIsRecorded(t *testing.T) {
	l, tk, _ := staged(t, `echo "key $ANTHROPIC_API_KEY"; echo "err $ANTHROPIC_API_KEY" >&2; echo edited >a.txt`, "1h")
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out, err := agentstep.Run(context.Background(), l, tk, map[string]string{"ANTHROPIC_API_KEY": secret}, agentstep.Config{Backend: tasktest.Backend(t), Runner: r})
	if err != nil || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("run = %+v, %v", out, err)
	}
	if out.RunID != "task-e2e.agent" {
		t.Errorf("run id = %q, want task-e2e.agent", out.RunID)
	}
	res, err := r.Store().ReadResult(out.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != job.StatusCompleted || res.PolicyDecision.Action != job.ActionAllow {
		t.Errorf("recorded = %s %+v, want completed and allowed", res.Status, res.PolicyDecision)
	}
	if want := "key " + agentstep.Redacted + "\n"; res.Stdout.Text != want || res.Stderr.Text != "err "+agentstep.Redacted+"\n" {
		t.Errorf("recorded output = %q / %q, want it scrubbed", res.Stdout.Text, res.Stderr.Text)
	}
	if got, _ := os.ReadFile(filepath.Join(l.Inbox(), "a.txt")); string(got) != "edited\n" {
		t.Errorf("inbox a.txt = %q: the agent did not edit the live workspace", got)
	}
	err = filepath.Walk(r.Store().RunDir(out.RunID), func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) {
			t.Errorf("%s holds the secret", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOperatorPolicyDeniesTheAgent: an agent command outside the
// operator's task policy never starts; the error is the policy's and the
// step's record says so.
func TestOperatorPolicyDeniesTheAgent(t *testing.T) {
	l, tk, _ := staged(t, `echo ran >ran.txt`, "1h")
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pol := &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "claude"}}}
	out, err := agentstep.Run(context.Background(), l, tk, nil, agentstep.Config{Backend: tasktest.Backend(t), Runner: r, Policy: pol})
	if job.CodeOf(err) != job.CodeShellDenied && job.CodeOf(err) != job.CodeCommandDenied {
		t.Fatalf("denied agent = %+v, %v; want a policy denial", out, err)
	}
	if _, serr := os.Stat(filepath.Join(l.Inbox(), "ran.txt")); serr == nil {
		t.Errorf("the denied agent ran")
	}
	res, rerr := r.Store().ReadResult(out.RunID)
	if rerr != nil || res.Status != job.StatusPolicyDenied || res.Error == nil || res.Error.Code != job.CodeOf(err) {
		t.Errorf("record of %q = %+v, %v; want policy_denied with %s", out.RunID, res.Error, rerr, job.CodeOf(err))
	}
}
