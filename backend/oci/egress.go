package oci

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
)

// The egress bridge of a runc sandbox: the runner itself listens on
// 127.0.0.1:backend.ProxyPort inside the sandbox's network namespace (a
// socket made by a thread that entered it) and pipes every connection to
// the gateway's Unix socket on the host. Nothing is bound into the
// sandbox but the CA bundle; it has no interface but lo, and the gateway
// decides every connection. runsc is refused an egress bridge: gVisor's
// loopback is its own, out of the host's reach.

// caPath is where the run's CA bundle is bound inside the sandbox.
const caPath = "/.agent-runner/ca.pem"

// bridge is a listener in a sandbox's network namespace.
type bridge struct {
	ln     net.Listener
	socket string
	wg     sync.WaitGroup
}

// newBridge listens in the network namespace of pid and serves until
// close.
func newBridge(pid int, socket string) (*bridge, error) {
	ln, err := listenIn(pid, "127.0.0.1:"+strconv.Itoa(backend.ProxyPort))
	if err != nil {
		return nil, fmt.Errorf("the egress bridge: %w", err)
	}
	b := &bridge{ln: ln, socket: socket}
	b.wg.Go(b.serve)
	return b, nil
}

// listenIn makes a TCP listener in the network namespace of pid: a
// thread of its own enters it, listens, and is thrown away (the Go
// runtime never reuses a thread left locked).
func listenIn(pid int, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			c <- result{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			c <- result{err: err}
			return
		}
		ln, err := net.Listen("tcp", addr)
		c <- result{ln, err}
	}()
	r := <-c
	return r.ln, r.err
}

func (b *bridge) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.pipe(c)
	}
}

func (b *bridge) pipe(c net.Conn) {
	defer c.Close()
	g, err := net.Dial("unix", b.socket)
	if err != nil {
		return
	}
	defer g.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(g, c)
		g.(*net.UnixConn).CloseWrite()
	})
	io.Copy(c, g)
	c.(*net.TCPConn).CloseWrite()
	wg.Wait()
}

func (b *bridge) close() {
	b.ln.Close()
	b.wg.Wait()
}

// egressEnv replaces any proxy or CA variables in env with the bridge's.
func egressEnv(env []string, withCA bool) []string {
	ca := ""
	if withCA {
		ca = caPath
	}
	add := backend.ProxyEnv(ca)
	keys := map[string]bool{}
	for _, kv := range add {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(env)+len(add))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, add...)
}
