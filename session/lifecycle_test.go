package session_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// TestExpiry: the reaper ends a sandbox once its timeout_s has passed
// (and SetTimeout moves that), and an expired one answers
// session.not_running.
func TestExpiry(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := newFixture(t, "local_process", func(cfg *session.Config) { cfg.Now = c.now })
	id := f.create(t, session.CreateRequest{TimeoutS: 5}).ID
	if _, got := f.s.Reap(c.t.Add(4 * time.Second)); len(got) != 0 {
		t.Fatalf("Reap before the timeout = %v, want none", got)
	}
	c.t = c.t.Add(4 * time.Second)
	if _, err := f.s.SetTimeout(id, 10); err != nil {
		t.Fatal(err)
	}
	if _, got := f.s.Reap(c.t.Add(9 * time.Second)); len(got) != 0 {
		t.Fatalf("Reap before the new timeout = %v, want none", got)
	}
	if _, got := f.s.Reap(c.t.Add(10 * time.Second)); len(got) != 1 || got[0] != id {
		t.Fatalf("Reap at the new timeout = %v, want [%s]", got, id)
	}
	rec, err := f.s.Get(id)
	if err != nil || rec.State != session.StateExpired || rec.EndedAt == nil {
		t.Fatalf("Get = %s ended %v, %v; want expired", rec.State, rec.EndedAt, err)
	}
	_, err = f.s.Exec(context.Background(), id, session.ExecRequest{Argv: []string{"true"}})
	wantCode(t, "Exec in an expired sandbox", err, job.CodeSessionNotRunning)
	_, err = f.s.SetTimeout(id, 10)
	wantCode(t, "SetTimeout of an expired sandbox", err, job.CodeSessionNotRunning)
}

// TestCapAndRestart: creates past MaxSandboxes are
// session.limit_reached; a service started again over the records ends
// the sandboxes that were live failed with run.interrupted.
func TestCapAndRestart(t *testing.T) {
	f := newFixture(t, "local_process", func(cfg *session.Config) { cfg.MaxSandboxes = 1 })
	id := f.create(t, session.CreateRequest{ID: "mine"}).ID
	_, _, err := f.s.Create(context.Background(), session.CreateRequest{})
	wantCode(t, "a second Create", err, job.CodeSessionLimit)
	again, created, err := f.s.Create(context.Background(), session.CreateRequest{ID: "mine"})
	if err != nil || created || again.ID != id {
		t.Errorf("the same Create again = %s, %v, %v; want the sandbox, not created", again.ID, created, err)
	}
	_, _, err = f.s.Create(context.Background(), session.CreateRequest{ID: "mine", Metadata: map[string]string{"k": "v"}})
	wantCode(t, "another Create of the id", err, job.CodeJobConflict)
	restarted, err := session.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := restarted.Get(id)
	if err != nil || rec.State != session.StateFailed || rec.Error == nil || rec.Error.Code != job.CodeRunInterrupted {
		t.Fatalf("after a restart Get = %s %+v, %v; want failed run.interrupted", rec.State, rec.Error, err)
	}
}

// TestRefusals: what Create and the calls refuse, each with its code.
func TestRefusals(t *testing.T) {
	f := newFixture(t, "local_process", func(cfg *session.Config) { cfg.UnsafeLocalProcess = false })
	ctx := context.Background()
	_, _, err := f.s.Create(ctx, session.CreateRequest{})
	wantCode(t, "local_process without --unsafe-local-process", err, job.CodeInvalidRequest)
	f = newFixture(t, "local_process", nil)
	cases := []struct {
		name string
		req  session.CreateRequest
		code job.Code
	}{
		{"allowlist network", session.CreateRequest{Network: &session.Network{Mode: job.NetworkAllowlist, AllowedHosts: []string{"example.com"}}}, job.CodeNetworkDenied},
		{"host network", session.CreateRequest{Network: &session.Network{Mode: job.NetworkHost}}, job.CodeNetworkDenied},
		{"unknown backend", session.CreateRequest{Backend: "firecracker"}, job.CodeInvalidRequest},
		{"memory over the maximum", session.CreateRequest{Limits: session.Limits{MemoryMB: 1 << 30}}, job.CodeLimitExceeded},
		{"timeout over the maximum", session.CreateRequest{TimeoutS: 1 << 40}, job.CodeLimitExceeded},
		{"policy confining the whole sandbox's programs", session.CreateRequest{Policy: &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "cat"}}, AllowShell: true, ExecScope: job.ExecScopeEveryProcess}}, job.CodeInvalidRequest},
		{"bad id", session.CreateRequest{ID: "../x"}, job.CodeInvalidRequest},
		{"workspace without roots", session.CreateRequest{Workspace: &session.Workspace{Path: t.TempDir()}}, job.CodePathEscape},
	}
	for _, c := range cases {
		_, _, err := f.s.Create(ctx, c.req)
		wantCode(t, c.name, err, c.code)
	}
	if list, _ := f.s.List(session.Filter{}); len(list) != 0 {
		t.Errorf("refused creates left records: %v", list)
	}
	_, err = f.s.Get("no-such")
	wantCode(t, "Get of an unknown id", err, job.CodeJobNotFound)
	_, err = f.s.Exec(ctx, "no-such", session.ExecRequest{Argv: []string{"true"}})
	wantCode(t, "Exec in an unknown sandbox", err, job.CodeJobNotFound)
	_, err = f.s.Delete(context.Background(), "no-such")
	wantCode(t, "Delete of an unknown sandbox", err, job.CodeJobNotFound)
}

// TestDelete: a deleted sandbox is stopped, its workspace gone, and
// answers session.not_running; deleting it again answers the record.
func TestDelete(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	id := f.create(t, session.CreateRequest{}).ID
	rec, err := f.s.Delete(context.Background(), id)
	if err != nil || rec.State != session.StateStopped {
		t.Fatalf("Delete = %s, %v; want stopped", rec.State, err)
	}
	var buf bytes.Buffer
	wantCode(t, "ReadFile after Delete", f.s.ReadFile(context.Background(), id, "a", &buf), job.CodeSessionNotRunning)
	if rec, err := f.s.Delete(context.Background(), id); err != nil || rec.State != session.StateStopped {
		t.Errorf("Delete again = %s, %v; want stopped", rec.State, err)
	}
}

// TestSandboxesApart: on linux_sandbox two sandboxes cannot see each
// other's files, nor reach the other's workspace on the host.
func TestSandboxesApart(t *testing.T) {
	f := newFixture(t, "linux_sandbox", nil)
	ctx := context.Background()
	a := f.create(t, session.CreateRequest{ID: "a"}).ID
	b := f.create(t, session.CreateRequest{ID: "b"}).ID
	if err := f.s.WriteFile(ctx, a, "secret.txt", []byte("a's"), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	wantCode(t, "b's ReadFile of a's file", f.s.ReadFile(ctx, b, "secret.txt", &buf), job.CodeJobNotFound)
	aHost := filepath.Join(f.cfg.Records.Path(a), "workspace", "secret.txt")
	for _, p := range []string{aHost, "../a/workspace/secret.txt", "/workspace/../a/workspace/secret.txt"} {
		res := f.exec(t, b, "cat", p)
		if res.Status == job.StatusCompleted || strings.Contains(res.Stdout, "a's") {
			t.Errorf("b's cat %s = %s %q; want it failed", p, res.Status, res.Stdout)
		}
	}
	if res := f.exec(t, a, "cat", "secret.txt"); res.Stdout != "a's" {
		t.Errorf("a's own cat = %s %q %+v", res.Status, res.Stdout, res.Error)
	}
}

// TestRetain: the store's retention removes an ended sandbox's record
// once session.Retention has passed, never a live one's.
func TestRetain(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := newFixture(t, "local_process", func(cfg *session.Config) { cfg.Now = c.now; cfg.MaxTimeout = 365 * 24 * time.Hour })
	live := f.create(t, session.CreateRequest{ID: "live", TimeoutS: 100 * 24 * 3600}).ID
	gone := f.create(t, session.CreateRequest{ID: "gone"}).ID
	if _, err := f.s.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	if got, err := f.s.Retain(c.t.Add(session.Retention - time.Minute)); err != nil || len(got) != 0 {
		t.Fatalf("Retain before the retention = %v, %v; want none", got, err)
	}
	got, err := f.s.Retain(c.t.Add(session.Retention + time.Minute))
	if err != nil || len(got) != 1 || got[0] != gone {
		t.Fatalf("Retain after the retention = %v, %v; want [%s]", got, err, gone)
	}
	if _, err := f.s.Get(live); err != nil {
		t.Errorf("the live sandbox's record is gone: %v", err)
	}
	_, err = f.s.Get(gone)
	wantCode(t, "Get of a retained sandbox", err, job.CodeJobNotFound)
}
