package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/door/httpapi"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/taskevent"
)

// sseEvent is one parsed event of a text/event-stream.
type sseEvent struct {
	id, typ string
	ev      httpapi.StreamEvent
	data    string
}

// openEvents opens GET /v1/events (with Last-Event-ID when lastID is not
// empty) and returns its events as they arrive; the stream closes with
// the test.
func openEvents(t *testing.T, e *env, lastID string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/v1/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET /v1/events = %d %s %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	out := make(chan sseEvent, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var cur sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.typ != "" {
					out <- cur
				}
				cur = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				cur.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				cur.typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				cur.data = strings.TrimPrefix(line, "data: ")
				json.Unmarshal([]byte(cur.data), &cur.ev)
			}
		}
	}()
	return out
}

func nextSSE(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("event stream ended")
		}
		return ev
	case <-time.After(15 * time.Second):
		t.Fatal("no event in 15 s")
	}
	return sseEvent{}
}

// TestAllEventsStream: GET /v1/events opens with a ready event, then
// carries a job submitted afterwards (status events only, ids that resume)
// and a task's state change as {task_id, state, time}; Last-Event-ID
// resumes after an event; a malformed one is refused.
func TestAllEventsStream(t *testing.T) {
	e := newEnv(t, opts{})
	e.wait(e.submit(e.request([]string{"true"}, "true"))) // events before the stream opens are not sent
	events := openEvents(t, e, "")
	if ready := nextSSE(t, events); ready.typ != "ready" || ready.id == "" {
		t.Fatalf("first event = %+v, want ready with an id", ready)
	}
	id := e.submit(e.request([]string{"echo", "chunks stay on the job's stream"}, "echo"))
	var got []sseEvent
	for len(got) == 0 || got[len(got)-1].ev.Status != job.StatusCompleted {
		ev := nextSSE(t, events)
		if ev.typ != "status" || ev.ev.JobID != id || ev.id != fmt.Sprint(ev.ev.ID) {
			t.Fatalf("event %+v: want only status events of %s, with the SSE id in the data", ev, id)
		}
		got = append(got, ev)
	}
	if len(got) != 3 || got[0].ev.Status != job.StatusQueued || got[1].ev.Status != job.StatusRunning {
		t.Errorf("status events = %+v, want queued, running, completed", got)
	}
	if err := taskevent.PublishState(e.q, state.Record{TaskID: "task_x", State: state.Running}); err != nil {
		t.Fatal(err)
	}
	task := nextSSE(t, events)
	var fields struct {
		TaskID string `json:"task_id"`
		State  string `json:"state"`
	}
	json.Unmarshal([]byte(task.data), &fields)
	if task.typ != "task_state" || fields.TaskID != "task_x" || fields.State != "running" || task.ev.Time.IsZero() || task.ev.JobID != "" {
		t.Errorf("task event = %+v, want task_state task_x running with a time", task)
	}

	resumed := openEvents(t, e, got[0].id)
	if ready := nextSSE(t, resumed); ready.typ != "ready" || ready.id != got[0].id {
		t.Errorf("resumed first event = %+v, want ready with id %s", ready, got[0].id)
	}
	if ev := nextSSE(t, resumed); ev.id != got[1].id || ev.ev.Status != job.StatusRunning {
		t.Errorf("resumed after %s: %+v, want the running event id %s", got[0].id, ev, got[1].id)
	}

	req, _ := http.NewRequest(http.MethodGet, e.url+"/v1/events", nil)
	req.Header.Set("Last-Event-ID", "yesterday")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("GET /v1/events with Last-Event-ID yesterday = %d, want 422", resp.StatusCode)
	}
}

// TestAllEventsClosedQueueIsAnError: a stream that cannot be opened is
// answered with the error (503 queue.closed), not an empty 200 stream.
func TestAllEventsClosedQueueIsAnError(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true})
	e.q.Close()
	code, body, _ := get(t, e.url+"/v1/events")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), string(job.CodeQueueClosed)) {
		t.Errorf("GET /v1/events on a closed queue = %d %s, want 503 %s", code, body, job.CodeQueueClosed)
	}
}
