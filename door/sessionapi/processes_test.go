package sessionapi_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct{ ID, Type, Data string }

// readEvents reads pid's events with header lastID (none: "") until one
// of type until arrives.
func readEvents(t *testing.T, srv *httptest.Server, path, lastID, until string) []sseEvent {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("GET %s = %d %s; want 200 text/event-stream", path, resp.StatusCode, ct)
	}
	var evs []sseEvent
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
			evs = append(evs, ev)
			if ev.Type == until {
				return evs
			}
			ev = sseEvent{}
		}
	}
	t.Fatalf("GET %s ended after %+v without a %s event", path, evs, until)
	return nil
}

// TestProcessRoutes: a background process through the door: started
// (201, its pid), fed on stdin (raw body), its events read as SSE with
// byte offsets as ids, a resize without a pty 409 session.no_terminal,
// a bad signal 422, killed (canceled), and a reader resuming from the
// last id it got told only the exit.
func TestProcessRoutes(t *testing.T) {
	srv, _ := newServer(t)
	if a := call(t, srv, "POST", "/v1/sandboxes", `{"id": "p"}`); a.Status != 201 {
		t.Fatalf("create = %+v", a)
	}
	resp, err := http.Post(srv.URL+"/v1/sandboxes/p/processes", "application/json", strings.NewReader(`{"argv": ["sh", "-c", "while read l; do echo \"echo:$l\"; done"], "tag": "loop"}`))
	if err != nil {
		t.Fatal(err)
	}
	var info session.ProcessInfo
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if resp.StatusCode != 201 || info.PID <= 0 || info.Tag != "loop" || info.RunID != "p.proc-1" {
		t.Fatalf("start = %d %+v; want 201 with pid, tag loop, run p.proc-1", resp.StatusCode, info)
	}
	base := "/v1/sandboxes/p/processes/" + strconv.Itoa(info.PID)
	resp, err = http.Post(srv.URL+base+"/stdin", "application/octet-stream", strings.NewReader("a\n"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stdin = %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	evs := readEvents(t, srv, base+"/events?offset=0", "", "stdout")
	if evs[0].Type != "start" || evs[0].ID != "0" || evs[1].ID != "7" || !strings.Contains(evs[1].Data, `"data":"echo:a\n"`) {
		t.Errorf("events = %+v; want start (id 0), then stdout echo:a (id 7)", evs)
	}
	for _, tt := range []struct {
		method, path, body string
		status             int
		code               job.Code
	}{
		{"POST", base + "/resize", `{"cols": 100, "rows": 30}`, 409, job.CodeSessionNoTerminal},
		{"POST", base + "/signal", `{"signal": "NOPE"}`, 422, job.CodeInvalidRequest},
		{"POST", base + "/signal", `{"signal": "CONT"}`, 200, ""},
		{"GET", "/v1/sandboxes/p/processes/99999999", "", 404, job.CodeJobNotFound},
		{"GET", base + "/events?offset=99", "", 422, job.CodeInvalidRequest},
		{"GET", "/v1/sandboxes/p/processes", "", 200, ""},
	} {
		if a := call(t, srv, tt.method, tt.path, tt.body); a.Status != tt.status || a.Code != tt.code {
			t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, a.Status, a.Code, tt.status, tt.code)
		}
	}
	req, _ := http.NewRequest("DELETE", srv.URL+base, nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if resp.StatusCode != 200 || info.State != session.ProcessExited || info.Status != job.StatusCanceled {
		t.Fatalf("kill = %d %+v; want 200 exited canceled", resp.StatusCode, info)
	}
	evs = readEvents(t, srv, base+"/events", "7", "exit")
	if len(evs) != 1 || evs[0].ID != "7" {
		t.Errorf("events resumed from 7 = %+v; want only exit (id 7)", evs)
	}
}
