package session_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// TestExecKeepsState: two execs are processes of one sandbox: a file
// the first writes is read by the second, each is a run of its own
// recorded with the sandbox's id, and the record counts them.
func TestExecKeepsState(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, nil)
			rec := f.create(t, session.CreateRequest{Metadata: map[string]string{"owner": "t"}})
			first := f.exec(t, rec.ID, "sh", "-c", "echo kept >state.txt")
			second := f.exec(t, rec.ID, "cat", "state.txt")
			if second.Status != job.StatusCompleted || second.Stdout != "kept\n" {
				t.Fatalf("second exec = %s %q %+v; want completed \"kept\\n\"", second.Status, second.Stdout, second.Error)
			}
			if first.RunID == second.RunID {
				t.Errorf("both execs are run %s; want one run each", first.RunID)
			}
			for _, id := range []string{first.RunID, second.RunID} {
				res, err := f.r.Store().ReadResult(id)
				if err != nil || res.Sandbox != rec.ID {
					t.Errorf("run %s: recorded sandbox %q, %v; want %s", id, res.Sandbox, err, rec.ID)
				}
			}
			got, err := f.s.Get(rec.ID)
			if err != nil || got.Execs != 2 || got.LastRun != second.RunID {
				t.Errorf("Get = execs %d last_run %q, %v; want 2, %s", got.Execs, got.LastRun, err, second.RunID)
			}
			list, err := f.s.List(session.Filter{State: session.StateRunning, Metadata: map[string]string{"owner": "t"}})
			if err != nil || len(list) != 1 || list[0].ID != rec.ID {
				t.Errorf("List(running, owner=t) = %v, %v; want [%s]", list, err, rec.ID)
			}
			if list, _ := f.s.List(session.Filter{Metadata: map[string]string{"owner": "else"}}); len(list) != 0 {
				t.Errorf("List(owner=else) = %v, want none", list)
			}
		})
	}
}

// TestFiles: a write creates its parents and is read back, by the
// service and by an exec; paths leaving the workspace and symlinks are
// validation.path_escape; a missing file job.not_found.
func TestFiles(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, nil)
			id := f.create(t, session.CreateRequest{}).ID
			ctx := context.Background()
			if err := f.s.WriteFile(ctx, id, "d/e/f.txt", []byte("bytes\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := f.s.ReadFile(ctx, id, "d/e/f.txt", &buf); err != nil || buf.String() != "bytes\n" {
				t.Fatalf("ReadFile = %q, %v; want \"bytes\\n\"", buf.String(), err)
			}
			if res := f.exec(t, id, "cat", "d/e/f.txt"); res.Stdout != "bytes\n" {
				t.Errorf("exec cat = %q %+v, want the written bytes", res.Stdout, res.Error)
			}
			f.exec(t, id, "ln", "-s", "/etc", "link")
			for _, p := range []string{"../x", "/etc/passwd", "link/passwd", "d/../../x"} {
				wantCode(t, "ReadFile "+p, f.s.ReadFile(ctx, id, p, &buf), job.CodePathEscape)
				wantCode(t, "WriteFile "+p, f.s.WriteFile(ctx, id, p, []byte("x"), 0o644), job.CodePathEscape)
			}
			wantCode(t, "ReadFile of a missing file", f.s.ReadFile(ctx, id, "none.txt", &buf), job.CodeJobNotFound)
		})
	}
}

// TestPauseResume: a paused sandbox answers execs and writes
// session.not_running and still reads; resumed, it runs again.
func TestPauseResume(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, nil)
			id := f.create(t, session.CreateRequest{}).ID
			ctx := context.Background()
			if err := f.s.WriteFile(ctx, id, "a.txt", []byte("a"), 0o644); err != nil {
				t.Fatal(err)
			}
			rec, err := f.s.Pause(ctx, id)
			if err != nil || rec.State != session.StatePaused {
				t.Fatalf("Pause = %s, %v; want paused", rec.State, err)
			}
			_, err = f.s.Exec(ctx, id, session.ExecRequest{Argv: []string{"true"}})
			wantCode(t, "Exec while paused", err, job.CodeSessionNotRunning)
			wantCode(t, "WriteFile while paused", f.s.WriteFile(ctx, id, "b.txt", nil, 0o644), job.CodeSessionNotRunning)
			var buf bytes.Buffer
			if err := f.s.ReadFile(ctx, id, "a.txt", &buf); err != nil || buf.String() != "a" {
				t.Errorf("ReadFile while paused = %q, %v; want \"a\"", buf.String(), err)
			}
			if rec, err = f.s.Resume(ctx, id); err != nil || rec.State != session.StateRunning {
				t.Fatalf("Resume = %s, %v; want running", rec.State, err)
			}
			if res := f.exec(t, id, "cat", "a.txt"); res.Stdout != "a" {
				t.Errorf("exec after resume = %q %+v", res.Stdout, res.Error)
			}
		})
	}
}

// TestPolicyDenialRecorded: the sandbox's policy holds at every exec; a
// denied one is a recorded run, policy_denied.
func TestPolicyDenialRecorded(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	pol := &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "cat"}}, AllowShell: true}
	id := f.create(t, session.CreateRequest{Policy: pol}).ID
	res := f.exec(t, id, "ls")
	if res.Status != job.StatusPolicyDenied || res.Error == nil || res.Error.Code != job.CodeCommandDenied {
		t.Fatalf("exec ls = %s %+v; want policy_denied policy.command_denied", res.Status, res.Error)
	}
	stored, err := f.r.Store().ReadResult(res.RunID)
	if err != nil || stored.Status != job.StatusPolicyDenied {
		t.Errorf("recorded run %s = %s, %v; want policy_denied", res.RunID, stored.Status, err)
	}
	if ok := f.exec(t, id, "cat", "/dev/null"); ok.Status != job.StatusCompleted {
		t.Errorf("exec cat = %s %+v; want completed", ok.Status, ok.Error)
	}
}

// TestOperatorPolicy: a sandbox without a policy of its own runs under
// the operator's session policy; one with its own, under its own.
func TestOperatorPolicy(t *testing.T) {
	op := &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "cat"}}, AllowShell: true}
	f := newFixture(t, "local_process", func(cfg *session.Config) { cfg.Policy = op })
	plain := f.create(t, session.CreateRequest{}).ID
	if res := f.exec(t, plain, "ls"); res.Status != job.StatusPolicyDenied {
		t.Errorf("ls under the operator's policy = %s %+v, want policy_denied", res.Status, res.Error)
	}
	own := f.create(t, session.CreateRequest{Policy: &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "ls"}}, AllowShell: true}}).ID
	if res := f.exec(t, own, "ls"); res.Status != job.StatusCompleted {
		t.Errorf("ls under the sandbox's own policy = %s %+v, want completed", res.Status, res.Error)
	}
	bad := f.cfg
	bad.Policy = &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "cat"}}, ExecScope: job.ExecScopeEveryProcess}
	_, err := session.New(bad)
	wantCode(t, "New with an operator policy confining the whole sandbox's programs", err, job.CodeInvalidRequest)
}

// TestShellDeniedAtEveryExec: a sandbox whose policy has allow_shell
// false denies the shells to every process of it, not only to an exec's
// argv: find -exec sh is refused at the exec, recorded in the run's
// exec_denials, and id never runs; the sandbox goes on serving execs.
func TestShellDeniedAtEveryExec(t *testing.T) {
	f := newFixture(t, "linux_sandbox", nil)
	pol := &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "find"}, {Basename: "cat"}}}
	id := f.create(t, session.CreateRequest{Policy: pol}).ID
	res := f.exec(t, id, "find", ".", "-maxdepth", "0", "-exec", "sh", "-c", "echo ran-a-shell", ";")
	if bytes.Contains([]byte(res.Stdout), []byte("ran-a-shell")) {
		t.Fatalf("find -exec sh ran a shell in a sandbox without allow_shell: %+v", res)
	}
	stored, err := f.r.Store().ReadResult(res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.ExecDenialsTotal == 0 || len(stored.ExecDenials) == 0 {
		t.Errorf("the refused shell is not in the run's record: exec_denials %+v (total %d)", stored.ExecDenials, stored.ExecDenialsTotal)
	}
	if ok := f.exec(t, id, "cat", "/dev/null"); ok.Status != job.StatusCompleted {
		t.Errorf("exec cat after the denial = %s %+v; want completed", ok.Status, ok.Error)
	}
}

// TestImageRefused: a create naming an image on a server without an
// image store is refused with its field, and nothing is left behind.
func TestImageRefused(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	_, _, err := f.s.Create(context.Background(), session.CreateRequest{Image: "python:3.12"})
	wantCode(t, "Create with an image", err, job.CodeInvalidRequest)
	var jerr *job.Error
	if !errors.As(err, &jerr) || jerr.Details["field"] != "image" {
		t.Fatalf("Create with an image = %v, want details.field image", err)
	}
	if recs, err := f.s.List(session.Filter{}); err != nil || len(recs) != 0 {
		t.Fatalf("List after a refused create = %v, %v; want none", recs, err)
	}
}
