package sessionapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/session"
)

// terminal is a test's end of a process socket: what the process
// showed so far on channel 1, and its status frame once it came.
type terminal struct {
	t      *testing.T
	c      *websocket.Conn
	ctx    context.Context
	shown  strings.Builder
	status string
}

// send writes one frame on channel ch.
func (term *terminal) send(ch byte, b []byte) {
	term.t.Helper()
	if err := term.c.Write(term.ctx, websocket.MessageBinary, append([]byte{ch}, b...)); err != nil {
		term.t.Fatalf("write on channel %d: %v", ch, err)
	}
}

// waitFor reads frames until what the terminal showed since the last
// wait contains want, or a status frame came (then want may be "").
func (term *terminal) waitFor(want string) {
	term.t.Helper()
	term.shown.Reset()
	for !strings.Contains(term.shown.String(), want) || (want == "" && term.status == "") {
		typ, b, err := term.c.Read(term.ctx)
		if err != nil {
			term.t.Fatalf("waiting for %q, the terminal showed %q, then %v", want, term.shown.String(), err)
		}
		if typ != websocket.MessageBinary || len(b) == 0 {
			continue
		}
		switch b[0] {
		case 1, 2:
			term.shown.Write(b[1:])
		case 3:
			term.status = string(b[1:])
			if want != "" {
				term.t.Fatalf("waiting for %q, the process ended: %s (it showed %q)", want, term.status, term.shown.String())
			}
		}
	}
}

// TestProcessSocket: a shell on a pty driven over the WebSocket with
// Kubernetes exec framing: stty size says the size of the start, then
// the size a resize frame set; Ctrl-C on channel 0 interrupts the
// foreground sleep and the shell answers again; exit ends it with a
// Success status frame.
func TestProcessSocket(t *testing.T) {
	srv, _ := newServer(t)
	if a := call(t, srv, "POST", "/v1/sandboxes", `{"id": "tty", "policy": {"allowed_commands": ["sh"], "allow_shell": true}}`); a.Status != 201 {
		t.Fatalf("create = %+v", a)
	}
	resp, err := http.Post(srv.URL+"/v1/sandboxes/tty/processes", "application/json", strings.NewReader(`{"argv": ["sh"], "pty": {"cols": 80, "rows": 24}}`))
	if err != nil {
		t.Fatal(err)
	}
	var info session.ProcessInfo
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if resp.StatusCode != 201 || !info.Pty {
		t.Fatalf("start = %d %+v; want 201 with a pty", resp.StatusCode, info)
	}
	// A bound on the whole test, so that a shell that never answers
	// fails it instead of hanging the suite.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/sandboxes/tty/processes/" + strconv.Itoa(info.PID) + "/ws"
	c, hr, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{sessionapi.ExecSubprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if got := hr.Header.Get("Sec-WebSocket-Protocol"); got != sessionapi.ExecSubprotocol {
		t.Fatalf("subprotocol = %q, want %s", got, sessionapi.ExecSubprotocol)
	}
	term := &terminal{t: t, c: c, ctx: ctx}
	term.send(0, []byte("stty size\n"))
	term.waitFor("24 80")
	term.send(4, []byte(`{"Width": 100, "Height": 30}`))
	term.send(0, []byte("stty size\n"))
	term.waitFor("30 100")
	// The foreground process says it is armed just before it becomes
	// sleep; only an interrupt that reaches it lets the shell read the
	// next line within the hour.
	term.send(0, []byte("sh -c 'echo arm''ed; exec sleep 3600'\n"))
	term.waitFor("armed")
	term.send(0, []byte{0x03})
	term.send(0, []byte("echo back-$((40+2))\n"))
	term.waitFor("back-42")
	term.send(0, []byte("exit 0\n"))
	term.waitFor("")
	if !strings.Contains(term.status, `"status":"Success"`) {
		t.Errorf("status frame = %s; want Success", term.status)
	}
}
