package agentapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/agent/runs"
	"github.com/agent-runner/agent-runner/queue"
)

// runEvent is an agent_run event's fields.
type runEvent struct {
	Status     string
	Calls      int64
	Denied     int
	Tool       string
	Allowed    *bool
	ExitReason string
}

// TestRunProgressIsPublished: a scripted run publishes agent_run events
// on the events stream: once when it starts, after each tool call (its
// number, tool, allowed or denied, the denials so far) and when it ends
// (finished, with its counts and exit reason); on each event, the run
// (its counts so far while it runs) and its audit trail already show
// what the event says (a viewer re-reads them then).
func TestRunProgressIsPublished(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last, err := e.events.LastEventSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.events.AllEvents(ctx, last, func(env queue.Envelope) bool { return env.Kind == runs.EventKind })
	if err != nil {
		t.Fatal(err)
	}
	id := e.launch(t, runs.LaunchRequest{ManifestYAML: scriptedManifest, Mode: runs.ModeTask, TaskYAML: scriptedTask})
	var got []runEvent
	for len(got) == 0 || got[len(got)-1].Status == runs.StatusRunning {
		var env queue.Sequenced
		select {
		case env = <-ch:
		case <-ctx.Done():
			t.Fatalf("events so far %+v; no run end before the deadline", got)
		}
		var ev runs.Progress
		if err := json.Unmarshal(env.Payload, &ev); err != nil || env.ID != id || ev.RunID != id || env.Type != runs.EventKind || env.Time.IsZero() {
			t.Fatalf("event %+v (%v), want an agent_run of run %s with its time", env.Envelope, err, id)
		}
		var run runs.Run
		if code := e.call(t, "GET", "/v1/agent-runs/"+id, nil, &run); code != http.StatusOK {
			t.Fatalf("GET run on an event = %d", code)
		}
		var trail runs.Trail
		if code := e.call(t, "GET", "/v1/agent-runs/"+id+"/audit", nil, &trail); code != http.StatusOK {
			t.Fatalf("GET audit on an event = %d", code)
		}
		calls := int64(0)
		for _, raw := range trail.Events {
			var line struct {
				Event string `json:"event"`
			}
			if json.Unmarshal(raw, &line) == nil && line.Event == "tool_call" {
				calls++
			}
		}
		if calls < ev.Calls {
			t.Errorf("on the event of call %d, the audit trail holds %d tool calls", ev.Calls, calls)
		}
		if run.Status == runs.StatusRunning && (run.ToolCallsUsed < ev.Calls || run.Denied < ev.Denied) {
			t.Errorf("on the event of call %d (%d denied), GET counts %d calls, %d denied", ev.Calls, ev.Denied, run.ToolCallsUsed, run.Denied)
		}
		if string(ev.Status) == runs.StatusFinished && run.Status != runs.StatusFinished {
			t.Errorf("on the finished event, GET says %q", run.Status)
		}
		got = append(got, runEvent{Status: string(ev.Status), Calls: ev.Calls, Denied: ev.Denied, Tool: ev.Tool, Allowed: ev.Allowed, ExitReason: ev.ExitReason})
	}
	yes, no := true, false
	want := []runEvent{
		{Status: runs.StatusRunning},
		{Status: runs.StatusRunning, Calls: 1, Tool: "list_logs", Allowed: &yes},
		{Status: runs.StatusRunning, Calls: 2, Tool: "read_log", Allowed: &yes},
		{Status: runs.StatusRunning, Calls: 3, Denied: 1, Tool: "read_log", Allowed: &no},
		{Status: runs.StatusRunning, Calls: 4, Denied: 1, Tool: "run_tests", Allowed: &yes},
		{Status: runs.StatusFinished, Calls: 4, Denied: 1, ExitReason: launch.ExitCompleted},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent_run events of run %s (-want +got):\n%s", id, diff)
	}
}
