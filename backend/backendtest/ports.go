package backendtest

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// echoServer is a TCP echo server on 127.0.0.1 (a port the kernel
// picks) that prints its port once it listens. It is Python: the host
// toolchain has no such program, and python3 is in every sandbox's view.
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

// Ports runs the ports suite (backend.PortDialer): a server started in
// a sandbox is reached through DialPort, a closed port is
// session.port_unreachable, a port outside 1-65535 is
// validation.invalid_request, a deleted sandbox job.not_found; on an
// isolating backend one sandbox's DialPort cannot reach another
// sandbox's server. It skips when python3 (the server) is missing.
func Ports(t *testing.T, newBackend Factory) {
	python := systemPython()
	if python == "" {
		t.Skip("no /usr/bin/python3: the ports suite's server is a Python script")
	}
	t.Run("EchoThroughPort", func(t *testing.T) {
		sb, _ := create(t, newBackend(t))
		EchoThroughPort(t, sb)
	})
	t.Run("ClosedPortUnreachable", func(t *testing.T) {
		sb, _ := create(t, newBackend(t))
		port := closedPort(t, sb, python)
		_, err := dialer(t, sb).DialPort(context.Background(), port)
		wantCode(t, "DialPort(closed port)", err, job.CodeSessionPortUnreachable)
	})
	t.Run("BadPort", func(t *testing.T) {
		sb, _ := create(t, newBackend(t))
		for _, port := range []int{0, -1, 65536} {
			_, err := dialer(t, sb).DialPort(context.Background(), port)
			wantCode(t, "DialPort("+strconv.Itoa(port)+")", err, job.CodeInvalidRequest)
		}
	})
	t.Run("DeletedSandbox", func(t *testing.T) {
		sb, _ := create(t, newBackend(t))
		if err := sb.Delete(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, err := dialer(t, sb).DialPort(context.Background(), 8000)
		wantCode(t, "DialPort after Delete", err, job.CodeJobNotFound)
	})
	b := newBackend(t)
	if !b.Capabilities().Isolating {
		return
	}
	t.Run("OtherSandboxUnreachable", func(t *testing.T) {
		a, _ := create(t, b)
		other, _ := create(t, newBackend(t))
		port := startEcho(t, other, python)
		// The server answers in its own sandbox...
		echoOnce(t, dialer(t, other), port, "own\n")
		// ...and is not there for another.
		_, err := dialer(t, a).DialPort(context.Background(), port)
		wantCode(t, "DialPort(the other sandbox's port)", err, job.CodeSessionPortUnreachable)
	})
}

// systemPython is the system's python3 (a sandbox's view holds /usr,
// not a user's shims), or "".
func systemPython() string {
	for _, p := range []string{"/usr/bin/python3", "/bin/python3"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// EchoThroughPort starts an echo server in sb (a backend.PortDialer)
// and wants a line echoed through DialPort (for a backend's own tests
// of sandboxes built otherwise: another network mode). It skips where
// python3 is missing.
func EchoThroughPort(t *testing.T, sb backend.Sandbox) {
	t.Helper()
	python := systemPython()
	if python == "" {
		t.Skip("no /usr/bin/python3: the echo server is a Python script")
	}
	port := startEcho(t, sb, python)
	echoOnce(t, dialer(t, sb), port, "through the port\n")
}

func dialer(t *testing.T, sb backend.Sandbox) backend.PortDialer {
	t.Helper()
	d, ok := sb.(backend.PortDialer)
	if !ok {
		t.Fatalf("%T does not implement backend.PortDialer", sb)
	}
	return d
}

func wantCode(t *testing.T, call string, err error, want job.Code) {
	t.Helper()
	if got := job.CodeOf(err); got != want {
		t.Errorf("%s = %v, want code %s", call, err, want)
	}
}

// startEcho starts echoServer in sb and returns its port once it
// listens (the line it prints); the process dies with the sandbox.
func startEcho(t *testing.T, sb backend.Sandbox, python string) int {
	t.Helper()
	lines := &firstLine{line: make(chan string, 1)}
	p, err := sb.Start(context.Background(), backend.Exec{Argv: []string{python, "-c", echoServer}, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: lines, Stderr: &Buffer{}})
	if err != nil {
		t.Fatalf("Start(echo server): %v", err)
	}
	t.Cleanup(func() { p.Signal(syscall.SIGKILL) })
	ended := make(chan backend.Outcome, 1)
	go func() {
		o, _ := p.Wait(context.Background())
		ended <- o
	}()
	select {
	case line := <-lines.line:
		port, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("echo server printed %q, want its port", line)
		}
		return port
	case o := <-ended:
		t.Fatalf("echo server ended before it listened: %+v", o)
	}
	return 0
}

// closedPort is a port nothing in sb listens on: one the kernel gave a
// socket that was closed again (on a backend sharing the host's
// loopback another process could take it in between, which the suite
// accepts as unlikely).
func closedPort(t *testing.T, sb backend.Sandbox, python string) int {
	t.Helper()
	out := &Buffer{}
	o, err := sb.Exec(context.Background(), backend.Exec{
		Argv:   []string{python, "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"},
		Stdout: out, Stderr: &Buffer{},
	})
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("finding a free port: %v, %+v", err, o)
	}
	port, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("free port %q: %v", out.String(), err)
	}
	return port
}

// echoOnce dials port through d, writes msg and wants it back.
func echoOnce(t *testing.T, d backend.PortDialer, port int, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := d.DialPort(ctx, port)
	if err != nil {
		t.Fatalf("DialPort(%d): %v", port, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a bound, not an expectation
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != msg {
		t.Errorf("echo through port %d = %q, %v, want %q", port, got, err, msg)
	}
}

// firstLine sends the first line written to it on line.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	line chan string
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if i := strings.IndexByte(string(w.buf), '\n'); i >= 0 {
		w.sent = true
		w.line <- string(w.buf[:i])
	}
	return len(p), nil
}
