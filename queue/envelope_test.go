package queue_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

// env is an envelope of kind about id with payload (JSON, or "" for none).
func env(kind, id, typ, payload string) queue.Envelope {
	e := queue.Envelope{Kind: kind, ID: id, Type: typ}
	if payload != "" {
		e.Payload = json.RawMessage(payload)
	}
	return e
}

// describe names an event for comparison: kind, id, type and payload.
func describe(ev queue.Sequenced) string {
	return ev.Kind + " " + ev.ID + " " + ev.Type + " " + string(ev.Payload)
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

// TestEnvelopeOnTheWire: an envelope travels as {time, kind, id, type,
// payload}, the payload exactly as the producer encoded it; NewEnvelope
// encodes a payload and sets the time; an envelope without a kind, an id
// or a type is refused.
func TestEnvelopeOnTheWire(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	e := env("task", "t.1", "task_state", `{"task_id":"t.1","state":"running"}`)
	e.Time = at
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-11-27T09:00:00Z","kind":"task","id":"t.1","type":"task_state","payload":{"task_id":"t.1","state":"running"}}`
	if string(b) != want {
		t.Errorf("json.Marshal(envelope) = %s, want %s", b, want)
	}
	built, err := queue.NewEnvelope("job", "job_a", "status", struct {
		Status string `json:"status"`
	}{"queued"})
	if err != nil || string(built.Payload) != `{"status":"queued"}` || built.Time.IsZero() {
		t.Errorf("NewEnvelope = %+v, %v; want the payload encoded and a time", built, err)
	}
	if none, _ := queue.NewEnvelope("job", "job_a", "end", nil); none.Payload != nil {
		t.Errorf("NewEnvelope(nil payload).Payload = %s, want none", none.Payload)
	}
	if got := queue.Subject("task", "t.1"); got != "ar.events.task.t.1" {
		t.Errorf("Subject(task, t.1) = %q, want ar.events.task.t.1", got)
	}
	q := open(t, queue.Config{})
	for _, bad := range []queue.Envelope{env("", "x", "t", ""), env("job", "", "t", ""), env("job", "x", "", "")} {
		if err := q.Send(bad); job.CodeOf(err) != job.CodeInvalidRequest {
			t.Errorf("Send(%+v) = %v, want %s", bad, err, job.CodeInvalidRequest)
		}
	}
}

// TestAllEventsFollowsEveryKind: one stream carries every kind's events
// (ids with dots included) in publish order, filtered by keep; it resumes
// after a sequence, and starts after LastEventSeq with only what comes
// next.
func TestAllEventsFollowsEveryKind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := open(t, queue.Config{})
	publish := func(evs ...queue.Envelope) {
		t.Helper()
		for _, ev := range evs {
			if err := q.Send(ev); err != nil {
				t.Fatal(err)
			}
		}
		q.Flush(ctx)
	}
	publish(
		env("job", "job_a", "status", `{"status":"queued"}`),
		env("job", "job_a", "stdout", `{"data":"b3V0cHV0"}`),
		env("task", "task.with.dots", "task_state", `{"state":"pending"}`),
		env("agent_run", "run_a", "agent_run", `{"calls":1}`),
		env("job", "job.b", "status", `{"status":"running"}`),
	)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	noOutput := func(e queue.Envelope) bool { return e.Type != "stdout" }
	ch, err := q.AllEvents(sctx, 0, noOutput)
	if err != nil {
		t.Fatal(err)
	}
	all := readN(t, ctx, ch, 4)
	var got []string
	for _, ev := range all {
		got = append(got, describe(ev))
	}
	want := []string{
		`job job_a status {"status":"queued"}`,
		`task task.with.dots task_state {"state":"pending"}`,
		`agent_run run_a agent_run {"calls":1}`,
		`job job.b status {"status":"running"}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("AllEvents(0, no output) (-want +got):\n%s", diff)
	}
	if all[1].Time.IsZero() {
		t.Errorf("task event time is zero, want the publish time")
	}
	resumed, err := q.AllEvents(sctx, all[1].Seq, noOutput)
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
		t.Fatalf("LastEventSeq = %d, want at least %d", last, all[3].Seq)
	}
	fresh, err := q.AllEvents(sctx, last, nil)
	if err != nil {
		t.Fatal(err)
	}
	publish(env("task", "task_b", "task_state", `{"state":"running"}`))
	if got := readN(t, ctx, fresh, 1); describe(got[0]) != `task task_b task_state {"state":"running"}` {
		t.Errorf("AllEvents(LastEventSeq) first event = %q, want the task event published after", describe(got[0]))
	}
}

// TestWatchHearsOneKind: Watch is in place when it returns, hears the
// events of its kind (of one id when given) published afterwards, and
// nothing of other kinds or ids; stop ends it.
func TestWatchHearsOneKind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := open(t, queue.Config{})
	heard := make(chan string, 16)
	stopAll, err := q.Watch(ctx, "task", "", func(e queue.Envelope) { heard <- "all " + e.ID + " " + e.Type })
	if err != nil {
		t.Fatal(err)
	}
	stopOne, err := q.Watch(ctx, "task", "t.1", func(e queue.Envelope) { heard <- "one " + e.ID + " " + e.Type })
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []queue.Envelope{env("job", "t.1", "status", ""), env("task", "t.2", "a", ""), env("task", "t.1", "b", "")} {
		if err := q.Send(e); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for range 3 {
		select {
		case h := <-heard:
			got[h] = true
		case <-ctx.Done():
			t.Fatalf("heard %v before the deadline", got)
		}
	}
	if diff := cmp.Diff(map[string]bool{"all t.2 a": true, "all t.1 b": true, "one t.1 b": true}, got); diff != "" {
		t.Errorf("heard (-want +got):\n%s", diff)
	}
	stopAll()
	stopOne()
	// The end marker goes out on a watch of its own, after the stopped
	// ones: had they not stopped, they would hear the marker first.
	end := make(chan struct{})
	stopEnd, err := q.Watch(ctx, "task", "", func(queue.Envelope) { close(end) })
	if err != nil {
		t.Fatal(err)
	}
	defer stopEnd()
	q.Send(env("task", "t.1", "end", ""))
	select {
	case <-end:
	case <-ctx.Done():
		t.Fatal("the end marker was not heard")
	}
	select {
	case h := <-heard:
		t.Errorf("a stopped watch heard %q", h)
	default:
	}
}
