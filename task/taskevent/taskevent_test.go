package taskevent_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/taskevent"
)

// TestTaskEventsOnTheBus: a task's state change, output chunk and
// "recorded" news travel as envelopes of kind task about the task, with
// the payloads the task domain defines (the state change timed at its
// checkpoint); Watcher wakes on each of one task's events and on none of
// another's.
func TestTaskEventsOnTheBus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := queue.Open(ctx, queue.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	woken := make(chan struct{}, 8)
	stop, err := taskevent.Watcher{Q: q}.Watch(ctx, "t.1", func() { woken <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	events, err := q.Events(ctx, taskevent.Kind, "t.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	if err := taskevent.PublishState(q, state.Record{TaskID: "t.1", State: state.Running, LastCheckpoint: at}); err != nil {
		t.Fatal(err)
	}
	if err := taskevent.PublishState(q, state.Record{TaskID: "t.2", State: state.Running}); err != nil {
		t.Fatal(err)
	}
	if err := taskevent.PublishOutput(q, "t.1", "stderr", []byte("oops\xff")); err != nil {
		t.Fatal(err)
	}
	if err := taskevent.PublishRecorded(q, "t.1", "stdout"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		select {
		case ev := <-events:
			got = append(got, ev.Type+" "+string(ev.Payload))
			if ev.Type == taskevent.TypeState && !ev.Time.Equal(at) {
				t.Errorf("state event time = %v, want the checkpoint %v", ev.Time, at)
			}
		case <-ctx.Done():
			t.Fatalf("events so far %q", got)
		}
	}
	want := []string{
		`task_state {"task_id":"t.1","state":"running"}`,
		`task_stderr {"task_id":"t.1","data":"b29wc/8="}`,
		`task_recorded {"task_id":"t.1","record":"stdout"}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events of t.1 (-want +got):\n%s", diff)
	}
	for range 3 {
		select {
		case <-woken:
		case <-ctx.Done():
			t.Fatal("the watcher missed an event of t.1")
		}
	}
	// t.2's event was published before the last of t.1's, on the same
	// connection: had it woken the watcher, the wake-up would be here.
	select {
	case <-woken:
		t.Error("the watcher of t.1 woke for another task's event")
	default:
	}
}

// TestOutputType names each stream's event type.
func TestOutputType(t *testing.T) {
	for stream, want := range map[string]string{"stdout": taskevent.TypeStdout, "stderr": taskevent.TypeStderr, "metrics": taskevent.TypeMetrics} {
		if got := taskevent.OutputType(stream); got != want {
			t.Errorf("OutputType(%q) = %q, want %q", stream, got, want)
		}
	}
}
