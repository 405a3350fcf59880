package taskapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agent-runner/agent-runner/door/taskapi"
)

// streamMsg is one message of a task stream: its SSE id and its data.
type streamMsg struct{ ID, Data string }

// readStreamSSE reads a task's stream route as Server-Sent Events (no
// upgrade) to its end, resuming after lastID when it is not empty.
func readStreamSSE(t *testing.T, url, lastID string) ([]streamMsg, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []streamMsg
	var cur streamMsg
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "id: "):
			cur.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		case line == "" && cur.Data != "":
			out = append(out, cur)
			cur = streamMsg{}
		}
	}
	return out, resp.StatusCode
}

// byRecord splits a stream's messages by the record each comes from
// (events, stdout, stderr, heartbeats; the final error with the events),
// in order, without their ids: a resumed stream reads each record from
// where the viewer stood, so within a record the order is exact, while
// the two logs' chunks may interleave differently from the first reading
// (and an id says where both logs stand).
func byRecord(msgs []streamMsg) map[string][]string {
	out := map[string][]string{}
	for _, m := range msgs {
		var d taskapi.StreamMessage
		json.Unmarshal([]byte(m.Data), &d)
		d.ID = ""
		rec := "events"
		switch d.Type {
		case "output":
			rec = d.Stream
		case "progress", "metrics":
			rec = "heartbeats"
		}
		b, _ := json.Marshal(d)
		out[rec] = append(out[rec], string(b))
	}
	return out
}

// readStreamWS reads the same stream over a WebSocket, resuming with
// ?last_event_id=.
func readStreamWS(t *testing.T, url, lastID string) []streamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if lastID != "" {
		url += "?last_event_id=" + lastID
	}
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	var out []streamMsg
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Errorf("stream ended with %v, want a normal closure", err)
			}
			return out
		}
		var m taskapi.StreamMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("message %q: %v", b, err)
		}
		out = append(out, streamMsg{ID: m.ID, Data: string(b)})
	}
}

// TestTaskStreamResumesAfterEveryMessage: every message of a finished
// task's stream (state changes, output lines, progress and metrics of
// each heartbeat, the terminal state change held after the output, the
// final error) has an id, the same in the SSE id line and the data; a
// viewer that reconnects after any of them, over SSE or WebSocket, gets
// exactly the messages that followed it, each record's in order: no gap,
// no repeat. The terminal state change comes after the last output. A
// malformed id is refused.
func TestTaskStreamResumesAfterEveryMessage(t *testing.T) {
	base, origin, s := setupWith(t, nil)
	for _, tc := range []struct{ id, arg, final string }{{"resume-ok", "beat", "completed"}, {"resume-fail", "fail", "failed"}} {
		t.Run(tc.id, func(t *testing.T) {
			resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(manifest(tc.id, origin, tc.arg)))
			if err != nil || resp.StatusCode != 202 {
				t.Fatalf("submit = %v %v", resp, err)
			}
			waitState(t, base, tc.id, tc.final)
			// More output than one chunk, so ids fall inside the logs.
			f, err := os.OpenFile(filepath.Join(s.Dir(tc.id), "outbox", "progress", "stdout.log"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 200 {
				f.WriteString(strings.Repeat("x", 400) + " line " + string(rune('a'+i%26)) + "\n")
			}
			f.Close()
			url := base + "/ws/tasks/" + tc.id + "/stream"
			all, code := readStreamSSE(t, url, "")
			if code != 200 || len(all) < 210 {
				t.Fatalf("whole stream: %d messages, status %d", len(all), code)
			}
			seen := map[string]bool{}
			for _, m := range all {
				var d taskapi.StreamMessage
				json.Unmarshal([]byte(m.Data), &d)
				if m.ID == "" || d.ID != m.ID || seen[m.ID] {
					t.Fatalf("message %s: id line %q, want one, equal to the data's and unique", m.Data, m.ID)
				}
				seen[m.ID] = true
			}
			last := all[len(all)-1].Data
			if tc.final == "failed" && !strings.Contains(last, `"type":"error"`) {
				t.Errorf("last message %s, want the error", last)
			}
			for _, cut := range []int{0, 1, 5, 100, len(all) / 2, len(all) - 3, len(all) - 2, len(all) - 1} {
				want := byRecord(all[cut+1:])
				rest, _ := readStreamSSE(t, url, all[cut].ID)
				if diff := cmp.Diff(want, byRecord(rest), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("SSE resumed after message %d (id %s) (-want +got):\n%s", cut, all[cut].ID, diff)
				}
				if len(rest) > 0 && rest[len(rest)-1].ID != all[len(all)-1].ID {
					t.Errorf("SSE resumed after message %d ends with %s, want %s", cut, rest[len(rest)-1].Data, all[len(all)-1].Data)
				}
				if diff := cmp.Diff(want, byRecord(readStreamWS(t, url, all[cut].ID)), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("WebSocket resumed after message %d (id %s) (-want +got):\n%s", cut, all[cut].ID, diff)
				}
			}
			// Every heartbeat message resumes too (a line makes up to two).
			for i, m := range all {
				if strings.Contains(m.Data, `"type":"progress"`) {
					rest, _ := readStreamSSE(t, url, m.ID)
					if diff := cmp.Diff(byRecord(all[i+1:]), byRecord(rest), cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("resumed after the progress message %d (id %s) (-want +got):\n%s", i, m.ID, diff)
					}
					break
				}
			}
			for _, bad := range []string{"x", "1.2.3", "1.2.3.4.5.6.7", "-1.0.0.0.0.0", "0.0.0.0.3.0", "0.0.0.0.0.2"} {
				if _, code := readStreamSSE(t, url, bad); code != http.StatusUnprocessableEntity {
					t.Errorf("Last-Event-ID %q = %d, want 422", bad, code)
				}
			}
		})
	}
}

// wakeOnDemand is a task stream's Events whose wake-ups the test sends.
type wakeOnDemand struct {
	mu      sync.Mutex
	wakes   map[string][]func()
	stopped chan string
}

func (w *wakeOnDemand) Watch(_ context.Context, id string, wake func()) (func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wakes[id] = append(w.wakes[id], wake)
	return func() { w.stopped <- id }, nil
}

func (w *wakeOnDemand) wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.wakes[id] {
		f()
	}
}

// TestLogsWakeOnTheTasksEvents: with WithEvents, a stream reads a live
// task's records when the task's events wake it: a line written to the
// log reaches the viewer once woken, the terminal state ends the stream
// once woken, and the watch is stopped when the stream ends.
func TestLogsWakeOnTheTasksEvents(t *testing.T) {
	base, origin, s := setupWith(t, nil)
	ev := &wakeOnDemand{wakes: map[string][]func(){}, stopped: make(chan string, 4)}
	mux := http.NewServeMux()
	taskapi.Routes(mux, s, func(_ string, h http.Handler) http.Handler { return h }, taskapi.WithEvents(ev))
	woken := httptest.NewServer(mux)
	defer woken.Close()

	const id = "woken"
	resp, err := http.Post(base+"/api/v1/tasks", "application/yaml", strings.NewReader(manifest(id, origin, "slow")))
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("submit = %v %v", resp, err)
	}
	waitState(t, base, id, "running")
	req, _ := http.NewRequest("GET", woken.URL+"/api/v1/tasks/"+id+"/logs", nil)
	lresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer lresp.Body.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(lresp.Body)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "data: ") || strings.HasPrefix(l, "event: ") {
				lines <- l
			}
		}
	}()
	next := func(want string) {
		t.Helper()
		for l := range lines {
			if strings.Contains(l, want) {
				return
			}
		}
		t.Fatalf("stream ended before %q", want)
	}
	next(`"line":"working"`) // what the records held when the stream opened
	f, err := os.OpenFile(filepath.Join(s.Dir(id), "outbox", "progress", "stdout.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("written after the stream opened\n")
	f.Close()
	ev.wake(id)
	next(`"line":"written after the stream opened"`)

	if req, _ := http.NewRequest("DELETE", base+"/api/v1/tasks/"+id, nil); true {
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode/100 != 2 {
			t.Fatalf("cancel = %v %v", resp, err)
		}
	}
	waitState(t, base, id, "cancelled")
	ev.wake(id)
	next("event: completed")
	if got := <-ev.stopped; got != id {
		t.Errorf("stopped the watch of %q, want %q", got, id)
	}
}
