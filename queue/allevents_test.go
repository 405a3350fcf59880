package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

// describe names an event for comparison: type, job or task, status or
// state.
func describe(ev queue.Sequenced) string {
	if ev.Type == queue.EventTaskState {
		return ev.Type + " " + ev.TaskID + " " + ev.State
	}
	return ev.Type + " " + ev.JobID + " " + string(ev.Status)
}

// readN reads n events from ch, failing the test when ctx ends first.
func readN(t *testing.T, ctx context.Context, ch <-chan queue.Sequenced, n int) []queue.Sequenced {
	t.Helper()
	var out []queue.Sequenced
	for len(out) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream closed after %d of %d events", len(out), n)
			}
			out = append(out, ev)
		case <-ctx.Done():
			t.Fatalf("got %d of %d events before the deadline", len(out), n)
		}
	}
	return out
}

// TestAllEventsFollowsEveryJobAndTask: one stream carries the status
// events of every job (ids with dots included) and every task's state
// changes, in publish order, without output chunks when asked for status
// and task_state only; it resumes after a sequence, and starts after
// LastEventSeq with only what comes next.
func TestAllEventsFollowsEveryJobAndTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := open(t, queue.Config{})
	publish := func(evs ...queue.Event) {
		t.Helper()
		for _, ev := range evs {
			var err error
			if ev.TaskID != "" {
				err = q.PublishTaskEvent(ev)
			} else {
				err = q.Publish(ev)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		q.Flush(ctx)
	}
	publish(
		queue.Event{Type: queue.EventStatus, JobID: "job_a", Status: job.StatusQueued},
		queue.Event{Type: queue.EventStdout, JobID: "job_a", Data: []byte("output is left out")},
		queue.Event{TaskID: "task.with.dots", State: "pending"},
		queue.Event{Type: queue.EventEgress, JobID: "job_a", Data: []byte(`{}`)},
		queue.Event{Type: queue.EventStatus, JobID: "job.b", Status: job.StatusRunning},
		queue.Event{Type: queue.EventStatus, JobID: "job_a", Status: job.StatusCompleted},
	)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	ch, err := q.AllEvents(sctx, 0, queue.EventStatus, queue.EventTaskState)
	if err != nil {
		t.Fatal(err)
	}
	all := readN(t, ctx, ch, 4)
	var got []string
	for _, ev := range all {
		got = append(got, describe(ev))
	}
	want := []string{"status job_a queued", "task_state task.with.dots pending", "status job.b running", "status job_a completed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("AllEvents(0, status, task_state) (-want +got):\n%s", diff)
	}
	if all[1].Time.IsZero() {
		t.Errorf("task event time is zero, want the publish time")
	}

	resumed, err := q.AllEvents(sctx, all[1].Seq, queue.EventStatus, queue.EventTaskState)
	if err != nil {
		t.Fatal(err)
	}
	if got := readN(t, ctx, resumed, 2); got[0].Seq != all[2].Seq || got[1].Seq != all[3].Seq {
		t.Errorf("AllEvents after %d starts at %d, %d; want %d, %d", all[1].Seq, got[0].Seq, got[1].Seq, all[2].Seq, all[3].Seq)
	}

	last, err := q.LastEventSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last < all[3].Seq {
		t.Fatalf("LastEventSeq = %d, want at least %d (the last status event)", last, all[3].Seq)
	}
	fresh, err := q.AllEvents(sctx, last)
	if err != nil {
		t.Fatal(err)
	}
	publish(queue.Event{TaskID: "task_b", State: "running"})
	if got := readN(t, ctx, fresh, 1); describe(got[0]) != "task_state task_b running" {
		t.Errorf("AllEvents(LastEventSeq) first event = %q, want the task event published after", describe(got[0]))
	}
	if err := q.PublishTaskEvent(queue.Event{State: "running"}); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("PublishTaskEvent without a task id = %v, want %s", err, job.CodeInvalidRequest)
	}
}

// TestAgentRunEventsOnTheEventsStream: a capability run's progress goes
// to the events stream with its fields, AllEvents delivers it beside jobs'
// and tasks' events, and an event without a run id is refused.
func TestAgentRunEventsOnTheEventsStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := open(t, queue.Config{})
	last, err := q.LastEventSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := q.AllEvents(ctx, last, queue.EventStatus, queue.EventTaskState, queue.EventAgentRun)
	if err != nil {
		t.Fatal(err)
	}
	denied := false
	for _, ev := range []queue.Event{
		{RunID: "run_a", Status: "running"},
		{RunID: "run_a", Status: "running", Calls: 1, Denied: 1, Tool: "read_log", Allowed: &denied},
		{Type: queue.EventStatus, JobID: "job_a", Status: job.StatusQueued},
	} {
		if ev.RunID != "" {
			err = q.PublishAgentRunEvent(ev)
		} else {
			err = q.Publish(ev)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	q.Flush(ctx)
	got := readN(t, ctx, ch, 3)
	for i := range got {
		got[i].Seq, got[i].Time = 0, time.Time{}
	}
	want := []queue.Sequenced{
		{Event: queue.Event{Type: queue.EventAgentRun, RunID: "run_a", Status: "running"}},
		{Event: queue.Event{Type: queue.EventAgentRun, RunID: "run_a", Status: "running", Calls: 1, Denied: 1, Tool: "read_log", Allowed: &denied}},
		{Event: queue.Event{Type: queue.EventStatus, JobID: "job_a", Status: job.StatusQueued}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AllEvents (-want +got):\n%s", diff)
	}
	if err := q.PublishAgentRunEvent(queue.Event{Status: "running"}); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("PublishAgentRunEvent without a run id = %v, want %s", err, job.CodeInvalidRequest)
	}
}
