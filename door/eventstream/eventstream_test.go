package eventstream_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agent-runner/agent-runner/door/eventstream"
	"github.com/agent-runner/agent-runner/job"
)

// counting is a stream of n messages resuming after the id it was given
// ("" or a number): ids 1..n, type "tick", data {"n":<id>}.
func counting(n int, opts eventstream.Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := 0
		if from := eventstream.ResumeFrom(r, "last_event_id"); from != "" {
			var err error
			if start, err = strconv.Atoi(from); err != nil {
				http.Error(w, "bad id", http.StatusUnprocessableEntity)
				return
			}
		}
		eventstream.Serve(w, r, opts, func(ctx context.Context, send func(eventstream.Message) error) (string, error) {
			for i := start + 1; i <= n; i++ {
				id := strconv.Itoa(i)
				if err := send(eventstream.Message{ID: id, Type: "tick", Data: []byte(`{"n":` + id + `}`)}); err != nil {
					return "", err
				}
			}
			return "counted to " + strconv.Itoa(n), nil
		})
	})
}

// readSSE reads an event stream to its end: "id|type|data" per event.
func readSSE(t *testing.T, url string, header http.Header) (*http.Response, []string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	var id, typ, data string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if typ != "" {
				out = append(out, id+"|"+typ+"|"+data)
			}
			id, typ, data = "", "", ""
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	return resp, out
}

// TestSSEResumesAfterLastEventID: an SSE client gets every message with
// its id, type and data; one that reconnects with Last-Event-ID (or the
// query parameter, when it sets no header) gets what follows, once.
func TestSSEResumesAfterLastEventID(t *testing.T) {
	srv := httptest.NewServer(counting(5, eventstream.Options{Eager: true}))
	defer srv.Close()
	resp, all := readSSE(t, srv.URL, nil)
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("headers = %v, want text/event-stream, no-cache", resp.Header)
	}
	want := []string{`1|tick|{"n":1}`, `2|tick|{"n":2}`, `3|tick|{"n":3}`, `4|tick|{"n":4}`, `5|tick|{"n":5}`}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Fatalf("whole stream (-want +got):\n%s", diff)
	}
	for cut := range all {
		id := strings.SplitN(all[cut], "|", 2)[0]
		_, rest := readSSE(t, srv.URL, http.Header{"Last-Event-ID": {id}})
		if diff := cmp.Diff(all[cut+1:], rest, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("resumed after %s (-want +got):\n%s", id, diff)
		}
		_, viaQuery := readSSE(t, srv.URL+"?last_event_id="+id, nil)
		if diff := cmp.Diff(rest, viaQuery, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("resumed after %s by the query parameter (-header +query):\n%s", id, diff)
		}
	}
	_, both := readSSE(t, srv.URL+"?last_event_id=1", http.Header{"Last-Event-ID": {"4"}})
	if diff := cmp.Diff(all[4:], both); diff != "" {
		t.Errorf("Last-Event-ID 4 with ?last_event_id=1 (-want +got): the header wins\n%s", diff)
	}
}

// TestSSEErrorBeforeTheFirstMessage: a lazy stream whose follow fails
// before sending is answered with the error's status and code; an eager
// one has started (200) and just ends; a message without an id has no id
// line; an idle stream gets keep-alive comments.
func TestSSEErrorBeforeTheFirstMessage(t *testing.T) {
	fail := func(opts eventstream.Options) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			eventstream.Serve(w, r, opts, func(context.Context, func(eventstream.Message) error) (string, error) {
				return "", job.Errorf(job.CodeQueueClosed, "no stream")
			})
		}))
	}
	lazy := fail(eventstream.Options{})
	defer lazy.Close()
	resp, err := http.Get(lazy.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), string(job.CodeQueueClosed)) {
		t.Errorf("lazy stream failing = %d %s, want 503 %s", resp.StatusCode, b, job.CodeQueueClosed)
	}
	eager := fail(eventstream.Options{Eager: true})
	defer eager.Close()
	if resp, _ := readSSE(t, eager.URL, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("eager stream failing = %d, want 200 (it had started)", resp.StatusCode)
	}

	release := make(chan struct{})
	idle := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		eventstream.Serve(w, r, eventstream.Options{Eager: true, KeepAlive: time.Millisecond}, func(ctx context.Context, send func(eventstream.Message) error) (string, error) {
			if err := send(eventstream.Message{Type: "noid", Data: []byte(`{}`)}); err != nil {
				return "", err
			}
			<-release
			return "", nil
		})
	}))
	defer idle.Close()
	resp, err = http.Get(idle.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == ": keep-alive" {
			break
		}
	}
	close(release)
	if diff := cmp.Diff([]string{"event: noid", "data: {}", ""}, lines[:3]); diff != "" || lines[len(lines)-1] != ": keep-alive" {
		t.Errorf("idle stream lines %q: want the message without an id line, then a keep-alive comment", lines)
	}
}

// TestWebSocketCarriesTheSameStream: a WebSocket client gets each
// message's data as a text message and a normal closure with follow's
// reason; ?last_event_id= resumes; a failing stream closes with an
// internal error.
func TestWebSocketCarriesTheSameStream(t *testing.T) {
	srv := httptest.NewServer(counting(3, eventstream.Options{}))
	defer srv.Close()
	read := func(url string) ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		var got []string
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return got, err
			}
			got = append(got, string(b))
		}
	}
	got, err := read(srv.URL)
	if diff := cmp.Diff([]string{`{"n":1}`, `{"n":2}`, `{"n":3}`}, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "counted to 3" {
		t.Errorf("closed with %v, want 1000 \"counted to 3\"", err)
	}
	if got, _ := read(srv.URL + "?last_event_id=2"); !cmp.Equal(got, []string{`{"n":3}`}) {
		t.Errorf("resumed after 2 = %q, want the third only", got)
	}
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		eventstream.Serve(w, r, eventstream.Options{}, func(context.Context, func(eventstream.Message) error) (string, error) {
			return "", errors.New("broken")
		})
	}))
	defer failing.Close()
	if _, err := read(failing.URL); !errors.As(err, &ce) || ce.Code != websocket.StatusInternalError {
		t.Errorf("a failing stream closed with %v, want 1011", err)
	}
}

// TestIsWebSocket: only a request that asks to upgrade to a WebSocket is
// served as one, whatever the case and the other Connection tokens.
func TestIsWebSocket(t *testing.T) {
	tests := []struct {
		connection, upgrade string
		want                bool
	}{
		{"Upgrade", "websocket", true},
		{"keep-alive, upgrade", "WebSocket", true},
		{"keep-alive", "websocket", false},
		{"Upgrade", "h2c", false},
		{"", "", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		if tt.connection != "" {
			r.Header.Set("Connection", tt.connection)
		}
		if tt.upgrade != "" {
			r.Header.Set("Upgrade", tt.upgrade)
		}
		if got := eventstream.IsWebSocket(r); got != tt.want {
			t.Errorf("IsWebSocket(Connection %q, Upgrade %q) = %v, want %v", tt.connection, tt.upgrade, got, tt.want)
		}
	}
}
