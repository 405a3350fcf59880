package linuxsandbox

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
)

// TestDialConnRefusesOtherDescriptors: the runner uses a descriptor the
// init passed only when it is a TCP socket connected to
// 127.0.0.1:port; anything else (a Unix socket, a pipe, a socket to
// another port) is closed and refused.
func TestDialConnRefusesOtherDescriptors(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	tcpFD := func() int {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.(*net.TCPConn).File()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Dup(int(f.Fd()))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[1])
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wfd, _ := unix.Dup(int(w.Fd()))
	w.Close()
	for _, tt := range []struct {
		name string
		fd   int
		port int
	}{
		{"unix socket", pair[0], port},
		{"pipe", wfd, port},
		{"tcp to another port", tcpFD(), port + 1},
	} {
		c, err := dialConn(tt.port, dialReply{r: ctlReply{Op: "connected"}, fd: tt.fd})
		if c != nil {
			c.Close()
		}
		if got := job.CodeOf(err); got != job.CodeBackendSetupFailed {
			t.Errorf("dialConn(%s) = %v, want code %s", tt.name, err, job.CodeBackendSetupFailed)
		}
		if _, err := unix.FcntlInt(uintptr(tt.fd), unix.F_GETFD, 0); err != unix.EBADF {
			t.Errorf("dialConn(%s) left its descriptor open", tt.name)
		}
	}
	c, err := dialConn(port, dialReply{r: ctlReply{Op: "connected"}, fd: tcpFD()})
	if err != nil {
		t.Fatalf("dialConn(tcp to the port) = %v", err)
	}
	c.Close()
}
