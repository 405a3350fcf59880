package jobs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/jobs"
	"github.com/agent-runner/agent-runner/queue"
)

// followAll runs FollowAll(after) until the test ends and hands its events
// over a channel.
func followAll(t *testing.T, ctx context.Context, svc *jobs.Service, after uint64) <-chan jobs.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan jobs.Event, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = svc.FollowAll(ctx, after, func(ev jobs.Event) error {
			select {
			case out <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

// nextEvent is the next event, failing the test after 15 s.
func nextEvent(t *testing.T, ch <-chan jobs.Event) jobs.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(15 * time.Second):
		t.Fatal("no event in 15 s")
		return jobs.Event{}
	}
}

func describe(ev jobs.Event) string {
	if ev.Type == "task_state" {
		var f struct {
			TaskID string `json:"task_id"`
			State  string `json:"state"`
		}
		b, _ := json.Marshal(ev)
		json.Unmarshal(b, &f)
		return ev.Type + " " + f.TaskID + " " + f.State
	}
	return ev.Type + " " + ev.JobID + " " + string(ev.Status)
}

// publishTaskState publishes a task's state change as the task domain
// does (kind task, type task_state).
func publishTaskState(t *testing.T, q *queue.Queue, id, state string) {
	t.Helper()
	if err := q.Publish("task", id, "task_state", map[string]string{"task_id": id, "state": state}); err != nil {
		t.Fatal(err)
	}
}

// TestFollowAllSendsEveryStatusAndTaskState: FollowAll starts with a
// ready event, then carries a job's status changes (not its output) and
// a task's state change published after it began; resumed after an event
// it goes on from there; resumed after a sequence the stream never
// reached (a restarted server) it starts from now.
func TestFollowAllSendsEveryStatusAndTaskState(t *testing.T) {
	svc, ws := openPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := request("job_before-follow", ws, "echo", "earlier")
	if _, _, err := svc.Submit(ctx, &before); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Wait(ctx, before.JobID); err != nil {
		t.Fatal(err)
	}

	events := followAll(t, ctx, svc, jobs.FromNow)
	ready := nextEvent(t, events)
	if ready.Type != jobs.EventReady || ready.ID == 0 {
		t.Fatalf("first event = %+v, want ready with the sequence it starts after", ready)
	}
	req := request("job_followed", ws, "echo", "output stays on the job's stream")
	if _, _, err := svc.Submit(ctx, &req); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Wait(ctx, req.JobID); err != nil {
		t.Fatal(err)
	}
	publishTaskState(t, svc.Queue(), "task_followed", "running")
	var got []jobs.Event
	for len(got) < 4 {
		got = append(got, nextEvent(t, events))
	}
	var names []string
	for _, ev := range got {
		names = append(names, describe(ev))
	}
	want := []string{"status job_followed queued", "status job_followed running", "status job_followed completed", "task_state task_followed running"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("FollowAll events (-want +got):\n%s", diff)
	}
	for i, ev := range got {
		if ev.ID <= ready.ID || (i > 0 && ev.ID <= got[i-1].ID) {
			t.Errorf("event %d id %d: want ids increasing after ready's %d", i, ev.ID, ready.ID)
		}
	}

	resumed := followAll(t, ctx, svc, got[1].ID)
	if ev := nextEvent(t, resumed); ev.Type != jobs.EventReady || ev.ID != got[1].ID {
		t.Errorf("resumed first event = %+v, want ready with id %d", ev, got[1].ID)
	}
	if ev := nextEvent(t, resumed); describe(ev) != "status job_followed "+string(job.StatusCompleted) || ev.ID != got[2].ID {
		t.Errorf("resumed after %d = %q id %d, want %q id %d", got[1].ID, describe(ev), ev.ID, describe(got[2]), got[2].ID)
	}

	beyond := followAll(t, ctx, svc, got[3].ID+1000)
	if ev := nextEvent(t, beyond); ev.Type != jobs.EventReady || ev.ID != got[3].ID {
		t.Errorf("after a sequence never reached, first event = %+v, want ready with id %d (now)", ev, got[3].ID)
	}
	publishTaskState(t, svc.Queue(), "task_after_restart", "pending")
	if ev := nextEvent(t, beyond); describe(ev) != "task_state task_after_restart pending" {
		t.Errorf("after a sequence never reached, next event = %q, want the task event published after", describe(ev))
	}
}

// TestFollowAllSendsAgentRunProgress: a capability run's progress reaches
// FollowAll with its fields, and a job's output does not.
func TestFollowAllSendsAgentRunProgress(t *testing.T) {
	svc, _ := openPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := followAll(t, ctx, svc, jobs.FromNow)
	if ready := nextEvent(t, events); ready.Type != jobs.EventReady {
		t.Fatalf("first event = %+v, want ready", ready)
	}
	q := svc.Queue()
	if err := q.Publish(job.EventKind, "job_x", job.EventStdout, job.EventPayload{Data: []byte("left out")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		`{"status":"running","run_id":"run_followed","calls":2,"denied":1,"tool":"list_logs","allowed":true}`,
		`{"status":"finished","run_id":"run_followed","calls":2,"denied":1,"exit_reason":"completed"}`,
	} {
		if err := q.Publish("agent_run", "run_followed", "agent_run", json.RawMessage(p)); err != nil {
			t.Fatal(err)
		}
	}
	var got []map[string]any
	for len(got) < 2 {
		ev := nextEvent(t, events)
		b, _ := json.Marshal(ev)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("event %s: %v", b, err)
		}
		if m["time"] == nil || m["id"] == nil {
			t.Errorf("event %s: want its id and time", b)
		}
		delete(m, "id")
		delete(m, "time")
		got = append(got, m)
	}
	want := []map[string]any{
		{"type": "agent_run", "run_id": "run_followed", "status": "running", "calls": 2.0, "denied": 1.0, "tool": "list_logs", "allowed": true},
		{"type": "agent_run", "run_id": "run_followed", "status": "finished", "calls": 2.0, "denied": 1.0, "exit_reason": "completed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FollowAll agent_run events (-want +got):\n%s", diff)
	}
}

// TestFollowAllFromAnEmptyStream: a client that saw the ready event of an
// empty stream (id 0) and reconnects with it got "from now" and missed
// what happened in between; 0 now means before the first event.
func TestFollowAllFromAnEmptyStream(t *testing.T) {
	svc, ws := openPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := followAll(t, ctx, svc, jobs.FromNow)
	if ready := nextEvent(t, first); ready.Type != jobs.EventReady || ready.ID != 0 {
		t.Fatalf("ready of an empty stream = %+v, want id 0", ready)
	}
	// The client is away while a job runs.
	req := request("job_while_away", ws, "echo", "x")
	if _, _, err := svc.Submit(ctx, &req); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Wait(ctx, req.JobID); err != nil {
		t.Fatal(err)
	}
	resumed := followAll(t, ctx, svc, 0)
	if ready := nextEvent(t, resumed); ready.Type != jobs.EventReady {
		t.Fatalf("first event = %+v, want ready", ready)
	}
	if ev := nextEvent(t, resumed); describe(ev) != "status job_while_away queued" {
		t.Errorf("after resuming from 0 = %s, want the job's first status", describe(ev))
	}
}
