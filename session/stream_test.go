package session_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/session"
)

// busFixture is a local_process service whose events go on a real bus
// (an embedded queue), which FollowEvents reads.
func busFixture(t *testing.T) *fixture {
	t.Helper()
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return newFixture(t, "local_process", func(cfg *session.Config) { cfg.Events, cfg.Feed = q, q })
}

// streamed is a stream event as a client reads it.
type streamed struct {
	ID     uint64 `json:"id"`
	Type   string `json:"type"`
	State  string `json:"state"`
	RunID  string `json:"run_id"`
	Run    string `json:"run"`
	Status string `json:"status"`
}

// summary is what a test compares of an event: its type, and its state
// or its run and status.
func (e streamed) summary() string {
	if e.Type == session.EventRun {
		return e.Type + " " + e.Run + " " + e.RunID + " " + e.Status
	}
	return e.Type + " " + e.State
}

// stream is a FollowEvents running in the background: its events, then
// what it returned.
type stream struct {
	events <-chan streamed
	done   <-chan error
}

// followStream runs FollowEvents from after in the background.
func followStream(t *testing.T, f *fixture, id string, after uint64) stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	events, done := make(chan streamed, 64), make(chan error, 1)
	go func() {
		done <- f.s.FollowEvents(ctx, id, after, func(ev session.StreamEvent) error {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			var s streamed
			if err := json.Unmarshal(b, &s); err != nil {
				return err
			}
			events <- s
			return nil
		})
		close(events)
	}()
	return stream{events, done}
}

// collect reads events until the stream ends (it must, within 20 s).
func collect(t *testing.T, s stream) []streamed {
	t.Helper()
	var got []streamed
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				if err := <-s.done; err != nil {
					t.Fatalf("FollowEvents = %v", err)
				}
				return got
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("the stream did not end; got %+v", got)
		}
	}
}

func summaries(evs []streamed) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.summary()
	}
	return out
}

// next reads one event, failing the test after 10 s.
func next(t *testing.T, events <-chan streamed) streamed {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10 s")
	}
	return streamed{}
}

// TestFollowEvents: a sandbox's stream starts with its current state,
// then carries its state changes and its runs' status changes in order,
// each with its bus sequence, and ends after its final state; a client
// that resumes from any id gets exactly what followed it.
func TestFollowEvents(t *testing.T) {
	f := busFixture(t)
	ctx := context.Background()
	id := f.create(t, session.CreateRequest{ID: "st"}).ID
	live := followStream(t, f, id, session.FromRecord)
	if got := next(t, live.events).summary(); got != "session_state running" {
		t.Fatalf("first event = %q, want the record's state, running", got)
	}
	exec := f.exec(t, id, "true")
	proc, err := f.s.StartProcess(ctx, id, session.ProcessRequest{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	// The process ends before the pause, so its events come first.
	waitRunEnded(t, live.events, proc.RunID, &[]streamed{})
	if _, err := f.s.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	rest := collect(t, live)
	want := []string{
		"session_state paused", "session_state running", "session_state stopped",
	}
	if diff := cmp.Diff(want, summaries(rest)); diff != "" {
		t.Errorf("events after the runs (-want +got):\n%s", diff)
	}

	// From the start of the bus: everything, in order, ids increasing.
	all := collect(t, followStream(t, f, id, 0))
	want = []string{
		"session_state starting", "session_state running",
		"session_run exec " + exec.RunID + " running", "session_run exec " + exec.RunID + " completed",
		"session_run process " + proc.RunID + " running", "session_run process " + proc.RunID + " completed",
		"session_state paused", "session_state running", "session_state stopped",
	}
	if diff := cmp.Diff(want, summaries(all)); diff != "" {
		t.Fatalf("events from 0 (-want +got):\n%s", diff)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID <= all[i-1].ID {
			t.Errorf("event %d id %d after %d: ids must increase", i, all[i].ID, all[i-1].ID)
		}
	}
	// Resuming after each event misses nothing and repeats nothing.
	for i := range len(all) - 1 {
		got := collect(t, followStream(t, f, id, all[i].ID))
		if diff := cmp.Diff(summaries(all[i+1:]), summaries(got)); diff != "" {
			t.Errorf("resumed after %d (-want +got):\n%s", all[i].ID, diff)
		}
	}
	// After the final event, the stream sends the recorded final state
	// and ends; so does one that starts from the record, or after an id
	// beyond the bus (which began again).
	for _, after := range []uint64{all[len(all)-1].ID, session.FromRecord, all[len(all)-1].ID + 100} {
		got := collect(t, followStream(t, f, id, after))
		if diff := cmp.Diff([]string{"session_state stopped"}, summaries(got)); diff != "" {
			t.Errorf("from %d after the end (-want +got):\n%s", after, diff)
		}
	}
}

// waitRunEnded reads events until run runID's terminal status.
func waitRunEnded(t *testing.T, events <-chan streamed, runID string, seen *[]streamed) {
	t.Helper()
	for {
		ev := next(t, events)
		*seen = append(*seen, ev)
		if ev.Type == session.EventRun && ev.RunID == runID && job.Status(ev.Status).Terminal() {
			return
		}
	}
}

// TestFollowEventsRefuses: an unknown sandbox is job.not_found, and a
// service without a bus queue.closed, before anything is sent.
func TestFollowEventsRefuses(t *testing.T) {
	f := busFixture(t)
	nothing := func(session.StreamEvent) error { t.Error("an event was sent"); return nil }
	wantCode(t, "unknown sandbox", f.s.FollowEvents(context.Background(), "nope", session.FromRecord, nothing), job.CodeJobNotFound)
	plain := newFixture(t, "local_process", nil)
	id := plain.create(t, session.CreateRequest{ID: "nobus"}).ID
	wantCode(t, "no bus", plain.s.FollowEvents(context.Background(), id, session.FromRecord, nothing), job.CodeQueueClosed)
}

// TestFollowEventsProcessKilledByDelete: a process the delete kills has
// its terminal status on the stream before the sandbox's stopped, which
// ends it.
func TestFollowEventsProcessKilledByDelete(t *testing.T) {
	f := busFixture(t)
	ctx := context.Background()
	id := f.create(t, session.CreateRequest{ID: "killed"}).ID
	live := followStream(t, f, id, session.FromRecord)
	if got := next(t, live.events).summary(); got != "session_state running" {
		t.Fatalf("first event = %q, want the record's state, running", got)
	}
	proc, err := f.s.StartProcess(ctx, id, session.ProcessRequest{Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, live.events, proc.RunID, job.StatusRunning)
	if _, err := f.s.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	got := summaries(collect(t, live))
	if len(got) < 2 || got[len(got)-1] != "session_state stopped" || !strings.HasPrefix(got[len(got)-2], "session_run process "+proc.RunID+" ") {
		t.Fatalf("events after the delete = %q, want the process's end, then stopped", got)
	}
	if end := got[len(got)-2]; strings.HasSuffix(end, " running") {
		t.Errorf("the process's last event = %q, want a terminal status", end)
	}
}

// waitRun reads events until run runID's event with status.
func waitRun(t *testing.T, events <-chan streamed, runID string, status job.Status) {
	t.Helper()
	for {
		if ev := next(t, events); ev.Type == session.EventRun && ev.RunID == runID && ev.Status == string(status) {
			return
		}
	}
}
