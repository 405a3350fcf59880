package session_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// idleFixture is a local_process service on a settable clock.
func idleFixture(t *testing.T, edit func(*session.Config)) (*fixture, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := newFixture(t, "local_process", func(cfg *session.Config) {
		cfg.Now = c.now
		if edit != nil {
			edit(cfg)
		}
	})
	return f, c
}

// idle runs the idle check at the clock plus d.
func idle(f *fixture, c *clock, d time.Duration) (paused, expired []string) {
	return f.s.Idle(c.t.Add(d))
}

// wantState fails the test unless sandbox id is in st, paused by by.
func wantState(t *testing.T, f *fixture, id string, st session.State, by string) session.Record {
	t.Helper()
	rec, err := f.s.Get(id)
	if err != nil || rec.State != st || rec.PausedBy != by {
		t.Fatalf("Get(%s) = %s paused_by %q, %v; want %s paused_by %q", id, rec.State, rec.PausedBy, err, st, by)
	}
	return rec
}

// TestIdleAutoPause: a sandbox with auto_pause, idle for idle_timeout_s,
// is paused by the idle check (paused_by idle); a read answers without
// resuming it, an exec resumes it and runs; a caller's pause then holds
// (an exec is session.not_running) and the idle check leaves it.
func TestIdleAutoPause(t *testing.T) {
	f, c := idleFixture(t, nil)
	ctx := context.Background()
	id := f.create(t, session.CreateRequest{IdleTimeoutS: 10, AutoPause: true}).ID
	if err := f.s.WriteFile(ctx, id, "a.txt", []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, e := idle(f, c, 9*time.Second); len(p)+len(e) != 0 {
		t.Fatalf("Idle before idle_timeout_s = %v %v, want none", p, e)
	}
	if p, e := idle(f, c, 10*time.Second); !cmp.Equal(p, []string{id}) || len(e) != 0 {
		t.Fatalf("Idle at idle_timeout_s = paused %v expired %v, want paused [%s]", p, e, id)
	}
	wantState(t, f, id, session.StatePaused, session.PausedByIdle)
	var buf bytes.Buffer
	if err := f.s.ReadFile(ctx, id, "a.txt", &buf); err != nil || buf.String() != "a" {
		t.Fatalf("ReadFile while idle = %q, %v", buf.String(), err)
	}
	wantState(t, f, id, session.StatePaused, session.PausedByIdle)

	c.t = c.t.Add(time.Hour)
	if res := f.exec(t, id, "cat", "a.txt"); res.Status != job.StatusCompleted || res.Stdout != "a" {
		t.Fatalf("exec in an idle-paused sandbox = %s %q %+v; want it resumed and run", res.Status, res.Stdout, res.Error)
	}
	wantState(t, f, id, session.StateRunning, "")
	if p, _ := idle(f, c, 9*time.Second); len(p) != 0 {
		t.Fatalf("Idle 9 s after the exec = %v, want none", p)
	}

	if _, err := f.s.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantState(t, f, id, session.StatePaused, session.PausedByCaller)
	_, err := f.s.Exec(ctx, id, session.ExecRequest{Argv: []string{"true"}})
	wantCode(t, "Exec in a sandbox its caller paused", err, job.CodeSessionNotRunning)
	if p, e := idle(f, c, time.Hour); len(p)+len(e) != 0 {
		t.Errorf("Idle of a caller-paused sandbox = %v %v, want none", p, e)
	}
	if _, err := f.s.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantState(t, f, id, session.StateRunning, "")
}

// TestIdleCallerPauseHoldsAfterIdle: a caller's pause of a sandbox the
// idle check paused makes it hold: a later exec is refused.
func TestIdleCallerPauseHoldsAfterIdle(t *testing.T) {
	f, c := idleFixture(t, nil)
	id := f.create(t, session.CreateRequest{IdleTimeoutS: 5, AutoPause: true}).ID
	idle(f, c, 5*time.Second)
	wantState(t, f, id, session.StatePaused, session.PausedByIdle)
	if _, err := f.s.Pause(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	wantState(t, f, id, session.StatePaused, session.PausedByCaller)
	_, err := f.s.Exec(context.Background(), id, session.ExecRequest{Argv: []string{"true"}})
	wantCode(t, "Exec after the caller's pause", err, job.CodeSessionNotRunning)
}

// TestIdleExpires: without auto_pause an idle sandbox ends expired, its
// record saying why (end_reason idle); one whose timeout_s ran out says
// timeout.
func TestIdleExpires(t *testing.T) {
	f, c := idleFixture(t, nil)
	id := f.create(t, session.CreateRequest{IdleTimeoutS: 10}).ID
	other := f.create(t, session.CreateRequest{TimeoutS: 20}).ID
	if p, e := idle(f, c, 10*time.Second); len(p) != 0 || !cmp.Equal(e, []string{id}) {
		t.Fatalf("Idle = paused %v expired %v, want expired [%s]", p, e, id)
	}
	rec := wantState(t, f, id, session.StateExpired, "")
	if rec.EndReason != session.EndIdle {
		t.Errorf("end_reason = %q, want %q", rec.EndReason, session.EndIdle)
	}
	if _, got := f.s.Reap(c.t.Add(20 * time.Second)); !cmp.Equal(got, []string{other}) {
		t.Fatalf("Reap = %v, want [%s]", got, other)
	}
	if rec := wantState(t, f, other, session.StateExpired, ""); rec.EndReason != session.EndTimeout {
		t.Errorf("end_reason = %q, want %q", rec.EndReason, session.EndTimeout)
	}
}

// TestIdleHeld: a running background process and an attached client
// each keep a sandbox from idling; its idle time starts once the last
// of them ended; Touch starts it again.
func TestIdleHeld(t *testing.T) {
	f, c := idleFixture(t, nil)
	ctx := context.Background()
	id := f.create(t, session.CreateRequest{IdleTimeoutS: 10, AutoPause: true}).ID
	p, err := f.s.StartProcess(ctx, id, session.ProcessRequest{Argv: []string{"sleep", "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := idle(f, c, time.Hour); len(p) != 0 {
		t.Fatalf("Idle with a process running = %v, want none", p)
	}
	c.t = c.t.Add(time.Hour)
	detach, err := f.s.Attach(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.KillProcess(ctx, id, p.PID); err != nil {
		t.Fatal(err)
	}
	if p, _ := idle(f, c, time.Hour); len(p) != 0 {
		t.Fatalf("Idle with a client attached = %v, want none", p)
	}
	c.t = c.t.Add(time.Hour)
	detach()
	detach() // a second call does nothing
	if p, _ := idle(f, c, 9*time.Second); len(p) != 0 {
		t.Fatalf("Idle 9 s after the client left = %v, want none", p)
	}
	c.t = c.t.Add(5 * time.Second)
	f.s.Touch(id)
	if p, _ := idle(f, c, 9*time.Second); len(p) != 0 {
		t.Fatalf("Idle 9 s after Touch = %v, want none", p)
	}
	if p, _ := idle(f, c, 10*time.Second); !cmp.Equal(p, []string{id}) {
		t.Fatalf("Idle 10 s after Touch = %v, want [%s]", p, id)
	}
	// Attach wakes an idle-paused sandbox.
	detach, err = f.s.Attach(id)
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	wantState(t, f, id, session.StateRunning, "")
}

// TestIdleTimeoutSettings: the operator's default applies to a create
// that sets none, its maximum holds, and auto_pause needs a timeout.
func TestIdleTimeoutSettings(t *testing.T) {
	f, _ := idleFixture(t, func(cfg *session.Config) {
		cfg.DefaultIdleTimeout, cfg.MaxIdleTimeout = time.Minute, time.Hour
	})
	if rec := f.create(t, session.CreateRequest{}); rec.IdleTimeoutS != 60 {
		t.Errorf("idle_timeout_s = %d, want the default 60", rec.IdleTimeoutS)
	}
	_, _, err := f.s.Create(context.Background(), session.CreateRequest{IdleTimeoutS: 3601})
	wantCode(t, "idle_timeout_s over the maximum", err, job.CodeLimitExceeded)
	_, _, err = f.s.Create(context.Background(), session.CreateRequest{IdleTimeoutS: -1})
	wantCode(t, "a negative idle_timeout_s", err, job.CodeInvalidRequest)

	g, _ := idleFixture(t, nil)
	_, _, err = g.s.Create(context.Background(), session.CreateRequest{AutoPause: true})
	wantCode(t, "auto_pause without an idle timeout", err, job.CodeInvalidRequest)
	if rec := g.create(t, session.CreateRequest{}); rec.IdleTimeoutS != 0 {
		t.Errorf("idle_timeout_s without a default = %d, want 0 (never idle)", rec.IdleTimeoutS)
	}
}

// TestIdleHeldByExec: an exec in flight keeps its sandbox from idling.
func TestIdleHeldByExec(t *testing.T) {
	f, c := idleFixture(t, nil)
	id := f.create(t, session.CreateRequest{IdleTimeoutS: 10, AutoPause: true}).ID
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.s.Exec(ctx, id, session.ExecRequest{Argv: []string{"sleep", "3600"}})
		done <- err
	}()
	for {
		rec, err := f.s.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Execs == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	p, _ := idle(f, c, time.Hour)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(p) != 0 {
		t.Errorf("Idle with an exec in flight = %v, want none", p)
	}
	if p, _ := idle(f, c, 10*time.Second); len(p) != 1 {
		t.Errorf("Idle once the exec ended = %v, want [%s]", p, id)
	}
}
