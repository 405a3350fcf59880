package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// reap runs the reaper at the clock plus d, moving the clock there.
func reap(f *fixture, c *clock, d time.Duration) (paused, expired []string) {
	c.t = c.t.Add(d)
	return f.s.Reap(c.t)
}

// TestOnTimeoutPause: a sandbox with on_timeout pause is paused at its
// timeout (paused_by timeout, held until MaxPaused from then); calls
// that need it running answer as for a caller's pause; Pause answers it
// as it is; SetTimeout sets only what the resume gives; Resume gives it a
// fresh expires_at and it runs again, and the next timeout pauses it
// again.
func TestOnTimeoutPause(t *testing.T) {
	f, c := idleFixture(t, func(cfg *session.Config) { cfg.MaxPaused = time.Hour })
	ctx := context.Background()
	id := f.create(t, session.CreateRequest{TimeoutS: 10, OnTimeout: session.OnTimeoutPause}).ID
	if rec := wantState(t, f, id, session.StateRunning, ""); rec.OnTimeout != session.OnTimeoutPause || rec.AutoResume {
		t.Fatalf("on_timeout, auto_resume = %q, %v; want pause, false", rec.OnTimeout, rec.AutoResume)
	}
	if p, e := reap(f, c, 9*time.Second); len(p)+len(e) != 0 {
		t.Fatalf("Reap before the timeout = %v %v, want none", p, e)
	}
	if p, e := reap(f, c, time.Second); !cmp.Equal(p, []string{id}) || len(e) != 0 {
		t.Fatalf("Reap at the timeout = paused %v expired %v, want paused [%s]", p, e, id)
	}
	rec := wantState(t, f, id, session.StatePaused, session.PausedByTimeout)
	if want := c.t.Add(time.Hour); !rec.ExpiresAt.Equal(want) {
		t.Errorf("expires_at while paused = %v, want %v (MaxPaused from the pause)", rec.ExpiresAt, want)
	}
	if p, e := reap(f, c, time.Minute); len(p)+len(e) != 0 {
		t.Fatalf("Reap of a timeout-paused sandbox within MaxPaused = %v %v, want none", p, e)
	}

	_, err := f.s.Exec(ctx, id, session.ExecRequest{Argv: []string{"true"}})
	wantCode(t, "Exec in a timeout-paused sandbox", err, job.CodeSessionNotRunning)
	if _, err := f.s.Attach(id); job.CodeOf(err) != job.CodeSessionNotRunning {
		t.Errorf("Attach to a timeout-paused sandbox = %v, want session.not_running", err)
	}
	if _, err := f.s.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantState(t, f, id, session.StatePaused, session.PausedByTimeout)
	if _, err := f.s.SetTimeout(id, 30); err != nil {
		t.Fatal(err)
	}
	rec = wantState(t, f, id, session.StatePaused, session.PausedByTimeout)
	if rec.TimeoutS != 30 || !rec.ExpiresAt.Equal(c.t.Add(59*time.Minute)) {
		t.Errorf("after SetTimeout while paused: timeout_s %d expires_at %v; want 30 and the hold's end unchanged", rec.TimeoutS, rec.ExpiresAt)
	}

	c.t = c.t.Add(time.Minute)
	if _, err := f.s.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	rec = wantState(t, f, id, session.StateRunning, "")
	if want := c.t.Add(30 * time.Second); !rec.ExpiresAt.Equal(want) {
		t.Errorf("expires_at after Resume = %v, want %v (timeout_s from the resume)", rec.ExpiresAt, want)
	}
	if res := f.exec(t, id, "echo", "again"); res.Status != job.StatusCompleted || res.Stdout != "again\n" {
		t.Fatalf("exec after Resume = %s %q", res.Status, res.Stdout)
	}
	if p, _ := reap(f, c, 30*time.Second); !cmp.Equal(p, []string{id}) {
		t.Fatalf("Reap at the new timeout = paused %v, want [%s]", p, id)
	}
	wantState(t, f, id, session.StatePaused, session.PausedByTimeout)
}

// TestOnTimeoutPausedTooLong: a sandbox paused at its timeout and not
// resumed within MaxPaused ends expired, end_reason paused_too_long; one
// its caller (or the idle check) paused when its timeout ran out is
// paused_by timeout from then, held the same way.
func TestOnTimeoutPausedTooLong(t *testing.T) {
	f, c := idleFixture(t, func(cfg *session.Config) { cfg.MaxPaused = time.Hour })
	id := f.create(t, session.CreateRequest{TimeoutS: 10, OnTimeout: session.OnTimeoutPause}).ID
	held := f.create(t, session.CreateRequest{TimeoutS: 10, OnTimeout: session.OnTimeoutPause}).ID
	if _, err := f.s.Pause(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	if p, _ := reap(f, c, 10*time.Second); !cmp.Equal(p, []string{id, held}) && !cmp.Equal(p, []string{held, id}) {
		t.Fatalf("Reap at the timeout = paused %v, want both", p)
	}
	wantState(t, f, held, session.StatePaused, session.PausedByTimeout)
	if p, e := reap(f, c, time.Hour-time.Second); len(p)+len(e) != 0 {
		t.Fatalf("Reap before MaxPaused = %v %v, want none", p, e)
	}
	if _, e := reap(f, c, time.Second); len(e) != 2 {
		t.Fatalf("Reap at MaxPaused = expired %v, want both", e)
	}
	for _, sid := range []string{id, held} {
		rec := wantState(t, f, sid, session.StateExpired, "")
		if rec.EndReason != session.EndPausedTooLong {
			t.Errorf("%s end_reason = %q, want %q", sid, rec.EndReason, session.EndPausedTooLong)
		}
	}
	_, err := f.s.Resume(context.Background(), id)
	wantCode(t, "Resume after the hold ran out", err, job.CodeSessionNotRunning)
}

// TestOnTimeoutAutoResume: with auto_resume, a call that needs a
// timeout-paused sandbox running resumes it with a fresh expires_at (as
// an idle-paused one); a read does not.
func TestOnTimeoutAutoResume(t *testing.T) {
	f, c := idleFixture(t, nil)
	ctx := context.Background()
	id := f.create(t, session.CreateRequest{TimeoutS: 10, OnTimeout: session.OnTimeoutPause, AutoResume: true}).ID
	reap(f, c, 10*time.Second)
	wantState(t, f, id, session.StatePaused, session.PausedByTimeout)
	if _, err := f.s.ListFiles(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	wantState(t, f, id, session.StatePaused, session.PausedByTimeout)

	c.t = c.t.Add(time.Hour)
	if res := f.exec(t, id, "echo", "woken"); res.Status != job.StatusCompleted || res.Stdout != "woken\n" {
		t.Fatalf("exec in a timeout-paused sandbox with auto_resume = %s %q %+v; want it resumed and run", res.Status, res.Stdout, res.Error)
	}
	rec := wantState(t, f, id, session.StateRunning, "")
	if want := c.t.Add(10 * time.Second); !rec.ExpiresAt.Equal(want) {
		t.Errorf("expires_at after the wake = %v, want %v", rec.ExpiresAt, want)
	}
}

// TestOnTimeoutSettings: on_timeout defaults to end (the record says
// so), takes only end and pause, and auto_resume needs pause.
func TestOnTimeoutSettings(t *testing.T) {
	f, c := idleFixture(t, nil)
	id := f.create(t, session.CreateRequest{TimeoutS: 5}).ID
	if rec := wantState(t, f, id, session.StateRunning, ""); rec.OnTimeout != session.OnTimeoutEnd {
		t.Errorf("on_timeout = %q, want the default %q", rec.OnTimeout, session.OnTimeoutEnd)
	}
	if _, e := reap(f, c, 5*time.Second); !cmp.Equal(e, []string{id}) {
		t.Errorf("Reap of on_timeout end = expired %v, want [%s]", e, id)
	}
	for _, tc := range []struct {
		req   session.CreateRequest
		field string
	}{
		{session.CreateRequest{OnTimeout: "kill"}, "on_timeout"},
		{session.CreateRequest{AutoResume: true}, "auto_resume"},
		{session.CreateRequest{OnTimeout: session.OnTimeoutEnd, AutoResume: true}, "auto_resume"},
	} {
		_, _, err := f.s.Create(context.Background(), tc.req)
		wantCode(t, "Create "+tc.field, err, job.CodeInvalidRequest)
		if e := job.AsError(err); e == nil || e.Details["field"] != tc.field {
			t.Errorf("Create(%+v) details = %v, want field %q", tc.req, e, tc.field)
		}
	}
}
