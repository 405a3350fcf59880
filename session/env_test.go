package session_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// TestEnvDefault: a sandbox's env is every process's default
// environment, an exec's env overriding it per key; a background
// process gets it too.
func TestEnvDefault(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	rec := f.create(t, session.CreateRequest{Env: map[string]string{"GREETING": "hello", "MODE": "a"}})
	if rec.Env["GREETING"] != "hello" {
		t.Errorf("record env = %v, want the create's", rec.Env)
	}
	res, err := f.s.Exec(context.Background(), rec.ID, session.ExecRequest{Argv: []string{"sh", "-c", "echo $GREETING $MODE"}, Env: map[string]string{"MODE": "b"}})
	if err != nil || res.Stdout != "hello b\n" {
		t.Fatalf("exec = %q %+v, %v; want \"hello b\\n\"", res.Stdout, res.Error, err)
	}
	p, err := f.s.StartProcess(context.Background(), rec.ID, session.ProcessRequest{Argv: []string{"sh", "-c", "echo $GREETING $MODE"}})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err = f.s.FollowProcess(context.Background(), rec.ID, p.PID, 0, func(ev session.ProcessEvent) error {
		if o, ok := ev.Data.(session.OutputEvent); ok {
			out.WriteString(o.Data)
		}
		return nil
	})
	if err != nil || out.String() != "hello a\n" {
		t.Errorf("process output = %q, %v; want \"hello a\\n\"", out.String(), err)
	}
}

// TestEnvHeldToPolicy: a create's env keys must be allowed by the policy
// its execs run under (its own, else the operator's): policy.env_denied
// at create otherwise; malformed keys are validation.invalid_request.
func TestEnvHeldToPolicy(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	pol := &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "sh"}}, AllowShell: true, AllowedEnv: []string{"GREETING"}}
	_, _, err := f.s.Create(context.Background(), session.CreateRequest{Policy: pol, Env: map[string]string{"OTHER": "x"}})
	wantCode(t, "env beyond the sandbox's allowed_env", err, job.CodeEnvDenied)
	id := f.create(t, session.CreateRequest{Policy: pol, Env: map[string]string{"GREETING": "hi"}}).ID
	if res := f.exec(t, id, "sh", "-c", "echo $GREETING"); res.Status != job.StatusCompleted || res.Stdout != "hi\n" {
		t.Errorf("exec under the sandbox's policy = %s %q %+v", res.Status, res.Stdout, res.Error)
	}
	_, _, err = f.s.Create(context.Background(), session.CreateRequest{Env: map[string]string{"A=B": "x"}})
	wantCode(t, "a key with '='", err, job.CodeInvalidRequest)

	op := newFixture(t, "local_process", func(cfg *session.Config) { cfg.Policy = pol })
	_, _, err = op.s.Create(context.Background(), session.CreateRequest{Env: map[string]string{"OTHER": "x"}})
	wantCode(t, "env beyond the operator's allowed_env", err, job.CodeEnvDenied)
}
