package session_test

import (
	"bufio"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// echoServer listens on a loopback port the kernel picks, prints it,
// and echoes what each connection sends.
const echoServer = `import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    while True:
        d = c.recv(4096)
        if not d:
            break
        c.sendall(d)
    c.close()
`

// startEcho starts echoServer as a background process of sandbox id
// and returns its port, read from its first line of output.
func (f *fixture) startEcho(t *testing.T, id string) int {
	t.Helper()
	info, err := f.s.StartProcess(context.Background(), id, session.ProcessRequest{Argv: []string{"/usr/bin/python3", "-c", echoServer}})
	if err != nil {
		t.Fatalf("StartProcess(echo server) = %v", err)
	}
	var out strings.Builder
	errLine := errors.New("line")
	err = f.s.FollowProcess(context.Background(), id, info.PID, 0, func(ev session.ProcessEvent) error {
		if o, ok := ev.Data.(session.OutputEvent); ok {
			out.WriteString(o.Data)
			if strings.Contains(out.String(), "\n") {
				return errLine
			}
		}
		return nil
	})
	if err != errLine {
		t.Fatalf("echo server printed %q and ended (%v)", out.String(), err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("echo server printed %q, want its port", out.String())
	}
	return port
}

// TestDialPort: a running sandbox's server is reached through DialPort;
// a closed port, a bad port, a paused, an ended and an unknown sandbox
// are each their stable error.
func TestDialPort(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind, nil)
			rec := f.create(t, session.CreateRequest{})
			port := f.startEcho(t, rec.ID)
			c, err := f.s.DialPort(context.Background(), rec.ID, port)
			if err != nil {
				t.Fatalf("DialPort(%d) = %v", port, err)
			}
			c.Write([]byte("hello port\n"))
			got, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if got != "hello port\n" {
				t.Errorf("echo through DialPort = %q, %v; want %q", got, err, "hello port\n")
			}

			_, err = f.s.DialPort(context.Background(), rec.ID, 0)
			wantCode(t, "DialPort(port 0)", err, job.CodeInvalidRequest)
			_, err = f.s.DialPort(context.Background(), "no-such-sandbox", port)
			wantCode(t, "DialPort(unknown sandbox)", err, job.CodeJobNotFound)

			if _, err := f.s.Pause(context.Background(), rec.ID); err != nil {
				t.Fatal(err)
			}
			_, err = f.s.DialPort(context.Background(), rec.ID, port)
			wantCode(t, "DialPort(paused)", err, job.CodeSessionNotRunning)
			if _, err := f.s.Resume(context.Background(), rec.ID); err != nil {
				t.Fatal(err)
			}

			// The server's process is killed: its port closes.
			procs, err := f.s.Processes(rec.ID)
			if err != nil || len(procs) != 1 {
				t.Fatalf("Processes = %v, %v", procs, err)
			}
			if _, err := f.s.KillProcess(context.Background(), rec.ID, procs[0].PID); err != nil {
				t.Fatal(err)
			}
			_, err = f.s.DialPort(context.Background(), rec.ID, port)
			wantCode(t, "DialPort(closed port)", err, job.CodeSessionPortUnreachable)

			if _, err := f.s.Delete(context.Background(), rec.ID); err != nil {
				t.Fatal(err)
			}
			_, err = f.s.DialPort(context.Background(), rec.ID, port)
			wantCode(t, "DialPort(deleted)", err, job.CodeSessionNotRunning)
		})
	}
}
