package jobs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/jobs"
	"github.com/agent-runner/agent-runner/session"
)

// TestFollowAllSendsSessionState: a kept sandbox's state change, as
// package session publishes it, reaches FollowAll (GET /v1/events) with
// its payload's fields.
func TestFollowAllSendsSessionState(t *testing.T) {
	svc, _ := openPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := followAll(t, ctx, svc, jobs.FromNow)
	if ev := nextEvent(t, events); ev.Type != jobs.EventReady {
		t.Fatalf("first event = %+v, want ready", ev)
	}
	payload := session.Event{SandboxID: "sbx_1", State: session.StatePaused}
	if err := svc.Queue().Publish(session.EventKind, "sbx_1", session.EventState, payload); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, events)
	b, _ := json.Marshal(ev)
	var got struct {
		Type      string `json:"type"`
		SandboxID string `json:"sandbox_id"`
		State     string `json:"state"`
	}
	json.Unmarshal(b, &got)
	if got.Type != session.EventState || got.SandboxID != "sbx_1" || got.State != "paused" {
		t.Errorf("event = %s, want session_state sbx_1 paused", b)
	}
}
