package client_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/session"
)

// TestFollowSandboxEvents: the sandbox's own stream through the client:
// its state first, then its changes and its exec's run, ending with
// stopped; resumed after an event's id, the rest.
func TestFollowSandboxEvents(t *testing.T) {
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	c := sessionServerWith(t, func(cfg *session.Config) { cfg.Events, cfg.Feed = q, q })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "watched"}); err != nil {
		t.Fatal(err)
	}
	events, done := make(chan client.SandboxEvent, 16), make(chan error, 1)
	go func() {
		done <- c.FollowSandboxEvents(ctx, "watched", "", func(ev client.SandboxEvent) error {
			events <- ev
			return nil
		})
		close(events)
	}()
	if first := <-events; first.Type != client.SandboxEventState || first.State != "running" {
		t.Fatalf("first event = %+v, want the sandbox running", first)
	}
	if _, err := c.PauseSandbox(ctx, "watched"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResumeSandbox(ctx, "watched"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SandboxExec(ctx, "watched", client.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSandbox(ctx, "watched"); err != nil {
		t.Fatal(err)
	}
	var got []client.SandboxEvent
	for ev := range events {
		got = append(got, ev)
	}
	if err := <-done; err != nil {
		t.Fatalf("FollowSandboxEvents = %v", err)
	}
	want := []string{"session_state paused", "session_state running", "session_run exec watched.exec-1 running", "session_run exec watched.exec-1 completed", "session_state stopped"}
	if diff := cmp.Diff(want, summarize(got)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	var resumed []client.SandboxEvent
	if err := c.FollowSandboxEvents(ctx, "watched", strconv.FormatUint(got[1].ID, 10), func(ev client.SandboxEvent) error {
		resumed = append(resumed, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(summarize(got[2:]), summarize(resumed)); diff != "" {
		t.Errorf("resumed after %d (-want +got):\n%s", got[1].ID, diff)
	}
	err = c.FollowSandboxEvents(ctx, "nope", "", func(client.SandboxEvent) error { return nil })
	if code := job.CodeOf(err); code != job.CodeJobNotFound {
		t.Errorf("an unknown sandbox: %v, want %s", err, job.CodeJobNotFound)
	}
}

func summarize(evs []client.SandboxEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		if ev.Type == client.SandboxEventRun {
			out[i] = ev.Type + " " + ev.Run + " " + ev.RunID + " " + string(ev.Status)
		} else {
			out[i] = ev.Type + " " + string(ev.State)
		}
	}
	return out
}
