package sessionapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/session"
)

// newBusServer is newServer whose service publishes on, and follows, a
// real event bus (an embedded queue).
func newBusServer(t *testing.T) *httptest.Server {
	t.Helper()
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	srv, _ := newServerWith(t, func(cfg *session.Config) { cfg.Events, cfg.Feed = q, q })
	return srv
}

// openEvents opens path as SSE with header lastID (none: "") and sends
// each event on the channel, which is closed when the stream ends.
func openEvents(t *testing.T, srv *httptest.Server, path, lastID string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("GET %s = %d %s; want 200 text/event-stream", path, resp.StatusCode, ct)
	}
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		var ev sseEvent
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.Type = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.Type != "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	return out
}

// states are the session_state events' states (each checked to carry
// its id in its data too).
func states(t *testing.T, evs []sseEvent) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		var d struct {
			ID    json.Number `json:"id"`
			State string      `json:"state"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil || d.ID.String() != ev.ID {
			t.Errorf("event %+v: data id %q, want its id line (%v)", ev, d.ID, err)
		}
		if ev.Type == session.EventState {
			out = append(out, d.State)
		}
	}
	return out
}

// drain reads the stream to its end (within 20 s).
func drain(t *testing.T, events <-chan sseEvent) []sseEvent {
	t.Helper()
	var got []sseEvent
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("the stream did not end; got %+v", got)
		}
	}
}

// TestEventsRoute: GET /v1/sandboxes/{id}/events starts with the
// sandbox's state, carries its changes in order with their ids, ends
// after delete; Last-Event-ID and ?last_event_id= (WebSocket) resume
// after an id with nothing missed; an unknown sandbox is 404 and a
// malformed id 422 before any stream.
func TestEventsRoute(t *testing.T) {
	srv := newBusServer(t)
	if a := call(t, srv, "POST", "/v1/sandboxes", `{"id":"ev"}`); a.Status != 201 {
		t.Fatalf("create = %+v", a)
	}
	events := openEvents(t, srv, "/v1/sandboxes/ev/events", "")
	first := <-events
	if got := states(t, []sseEvent{first}); !cmp.Equal(got, []string{"running"}) {
		t.Fatalf("first event = %+v, want the sandbox's state, running", first)
	}
	for _, step := range []string{"pause", "resume"} {
		if a := call(t, srv, "POST", "/v1/sandboxes/ev/"+step, ""); a.Status != 200 {
			t.Fatalf("%s = %+v", step, a)
		}
	}
	if a := call(t, srv, "POST", "/v1/sandboxes/ev/exec", `{"argv":["true"]}`); a.Status != 200 {
		t.Fatalf("exec = %+v", a)
	}
	if a := call(t, srv, "DELETE", "/v1/sandboxes/ev", ""); a.Status != 200 {
		t.Fatalf("delete = %+v", a)
	}
	rest := drain(t, events)
	if diff := cmp.Diff([]string{"paused", "running", "stopped"}, states(t, rest)); diff != "" {
		t.Fatalf("states after the first (-want +got):\n%s", diff)
	}
	var runs []string
	for _, ev := range rest {
		if ev.Type == session.EventRun {
			var d session.RunEvent
			json.Unmarshal([]byte(ev.Data), &d)
			runs = append(runs, d.Run+" "+d.RunID+" "+string(d.Status))
		}
	}
	if diff := cmp.Diff([]string{"exec ev.exec-1 running", "exec ev.exec-1 completed"}, runs); diff != "" {
		t.Errorf("run events (-want +got):\n%s", diff)
	}

	// Resuming after the pause gets everything after it.
	resumed := drain(t, openEvents(t, srv, "/v1/sandboxes/ev/events", rest[0].ID))
	if diff := cmp.Diff(rest[1:], resumed); diff != "" {
		t.Errorf("resumed after %s (-want +got):\n%s", rest[0].ID, diff)
	}

	// The same over a WebSocket, which closes normally at the end.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/sandboxes/ev/events?last_event_id="+rest[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var ws []sseEvent
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Errorf("WebSocket ended with %v, want a normal close", err)
			}
			break
		}
		var d struct {
			ID   json.Number `json:"id"`
			Type string      `json:"type"`
		}
		json.Unmarshal(b, &d)
		ws = append(ws, sseEvent{ID: d.ID.String(), Type: d.Type, Data: string(b)})
	}
	if diff := cmp.Diff(rest[1:], ws); diff != "" {
		t.Errorf("WebSocket resumed after %s (-want +got):\n%s", rest[0].ID, diff)
	}

	// A resumed stream of a sandbox with nothing new starts at once.
	if a := call(t, srv, "POST", "/v1/sandboxes", `{"id":"quiet"}`); a.Status != 201 {
		t.Fatalf("create = %+v", a)
	}
	// Its running event, read off the bus: nothing comes after it.
	var running string
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, _ := http.NewRequestWithContext(sctx, "GET", srv.URL+"/v1/sandboxes/quiet/events", nil)
	req.Header.Set("Last-Event-ID", rest[len(rest)-1].ID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	for sc := bufio.NewScanner(resp.Body); running == "" && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), `"state":"running"`) {
			var d struct{ ID json.Number }
			json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data: ")), &d)
			running = d.ID.String()
		}
	}
	scancel()
	resp.Body.Close()
	qctx, qcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer qcancel()
	req, _ = http.NewRequestWithContext(qctx, "GET", srv.URL+"/v1/sandboxes/quiet/events", nil)
	req.Header.Set("Last-Event-ID", running)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a resumed stream did not start at once: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("resumed stream = %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	for _, tc := range []struct {
		path, lastID string
		want         answer
	}{
		{"/v1/sandboxes/nope/events", "", answer{Status: 404, Code: job.CodeJobNotFound}},
		{"/v1/sandboxes/ev/events", "x", answer{Status: 422, Code: job.CodeInvalidRequest}},
	} {
		req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
		if tc.lastID != "" {
			req.Header.Set("Last-Event-ID", tc.lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error job.Error }
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if got := (answer{Status: resp.StatusCode, Code: e.Error.Code}); got != tc.want {
			t.Errorf("GET %s (Last-Event-ID %q) = %+v, want %+v", tc.path, tc.lastID, got, tc.want)
		}
	}
}
