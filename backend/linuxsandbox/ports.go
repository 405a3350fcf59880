package linuxsandbox

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Ports: the runner never joins a sandbox's namespaces. To reach a
// server listening on 127.0.0.1:PORT inside, it asks the sandbox's init
// (pid 1, in the sandbox's network namespace) to connect; the init
// answers with the connected socket as SCM_RIGHTS on the control
// channel, and the runner wraps it (net.FileConn). The address is fixed
// to the sandbox's loopback and the port is the runner's request: no
// process of the sandbox can ask the init for a connection (the control
// socket never reaches the workload), and what comes back is checked to
// be a TCP socket connected to 127.0.0.1:PORT before the runner uses it.

var _ backend.PortDialer = (*Sandbox)(nil)

// loopbackDialTimeout bounds the init's connect to a port whose
// listener does not accept (a full backlog).
const loopbackDialTimeout = 10 * time.Second

// dialReply is the init's answer to a connect: its message and the
// socket it passed (-1: none).
type dialReply struct {
	r  ctlReply
	fd int
}

// DialPort implements backend.PortDialer through the sandbox's init. A
// sandbox on the host's network (network host) is refused with
// backend.unavailable: its loopback is the host's, not its own.
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if err := backend.CheckPort(port); err != nil {
		return nil, err
	}
	if s.p.cfg.HostNetwork {
		return nil, job.Errorf(job.CodeBackendUnavail, "sandbox %s uses the host's network: its loopback is the host's, and is not proxied", s.ID()).
			With("backend", Kind).With("network", job.NetworkHost)
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return nil, s.goneError()
	}
	s.nextID++
	id := s.nextID
	ch := make(chan dialReply, 1)
	s.dialing[id] = ch
	s.mu.Unlock()
	if err := ctlSend(s.fd, ctlRequest{Op: "connect", ID: id, Port: port}); err != nil {
		s.abandonDial(id, ch)
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot reach the sandbox init")
	}
	select {
	case rep, ok := <-ch:
		if !ok {
			return nil, s.goneError()
		}
		return dialConn(port, rep)
	case <-ctx.Done():
		s.abandonDial(id, ch)
		return nil, job.Wrap(job.CodeRunCanceled, ctx.Err(), "canceled while connecting to the sandbox's port")
	}
}

// goneError is why a sandbox whose init is gone takes no call.
func (s *Sandbox) goneError() error {
	if s.isDeleted() {
		return job.Errorf(job.CodeJobNotFound, "sandbox %s was deleted", s.ID()).With("sandbox", s.ID())
	}
	return job.Errorf(job.CodeBackendSetupFailed, "the init of sandbox %s is gone", s.ID()).With("sandbox", s.ID())
}

// abandonDial forgets connect id; a socket the reader already handed
// over is closed (a later answer finds no one waiting, and read closes
// it).
func (s *Sandbox) abandonDial(id uint64, ch chan dialReply) {
	s.mu.Lock()
	_, waiting := s.dialing[id]
	delete(s.dialing, id)
	s.mu.Unlock()
	if waiting {
		return
	}
	if rep, ok := <-ch; ok && rep.fd >= 0 {
		unix.Close(rep.fd)
	}
}

// deliverDial hands the init's answer r to the connect waiting for it,
// with its one descriptor, and returns the descriptors left to close.
// s.mu is held.
func (s *Sandbox) deliverDial(r ctlReply, fds []int) []int {
	ch, ok := s.dialing[r.ID]
	if !ok || (r.Op != "connected" && r.Op != "error") {
		return fds
	}
	delete(s.dialing, r.ID)
	rep := dialReply{r: r, fd: -1}
	if r.Op == "connected" && len(fds) == 1 {
		rep.fd, fds = fds[0], nil
	}
	ch <- rep
	return fds
}

// dialConn makes the init's answer a connection, or the error it says:
// nothing listening is session.port_unreachable. The descriptor must be
// a TCP socket connected to 127.0.0.1:port, else it is closed and the
// answer refused.
func dialConn(port int, rep dialReply) (net.Conn, error) {
	if rep.r.Op == "error" {
		if rep.r.Refused {
			return nil, backend.PortUnreachable(port, "refused")
		}
		return nil, backend.PortUnreachable(port, rep.r.Error)
	}
	if rep.fd < 0 {
		return nil, job.Errorf(job.CodeBackendSetupFailed, "the sandbox init answered a connect without a socket")
	}
	if err := checkLoopbackSocket(rep.fd, port); err != nil {
		unix.Close(rep.fd)
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "the sandbox init answered a connect with another descriptor")
	}
	f := os.NewFile(uintptr(rep.fd), "sandbox-port-"+strconv.Itoa(port))
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot use the sandbox's connection")
	}
	return c, nil
}

// checkLoopbackSocket fails unless fd is an IPv4 stream socket whose
// peer is 127.0.0.1:port.
func checkLoopbackSocket(fd, port int) error {
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return err
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return err
	}
	if domain != unix.AF_INET || typ != unix.SOCK_STREAM {
		return errors.New("not a TCP socket")
	}
	peer, err := unix.Getpeername(fd)
	if err != nil {
		return err
	}
	in4, ok := peer.(*unix.SockaddrInet4)
	if !ok || in4.Addr != [4]byte{127, 0, 0, 1} || in4.Port != port {
		return errors.New("not connected to the sandbox's loopback port")
	}
	return nil
}

// connectLoopback runs in the init: it connects to 127.0.0.1:req.Port
// in the sandbox's network namespace and passes the socket to the
// runner (connected), or says why not (error, Refused when nothing
// listens). The address is fixed; only the port is the request's.
func connectLoopback(req ctlRequest) {
	rep := ctlReply{Op: "error", ID: req.ID}
	if req.Port < 1 || req.Port > 65535 {
		rep.Error = "port out of range"
		ctlSend(ctlFD, rep)
		return
	}
	d := net.Dialer{Timeout: loopbackDialTimeout}
	c, err := d.Dial("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(req.Port)))
	if err != nil {
		rep.Error, rep.Refused = err.Error(), errors.Is(err, syscall.ECONNREFUSED)
		ctlSend(ctlFD, rep)
		return
	}
	defer c.Close()
	var sendErr error
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err == nil {
		err = raw.Control(func(fd uintptr) {
			sendErr = ctlSend(ctlFD, ctlReply{Op: "connected", ID: req.ID}, int(fd))
		})
	}
	if err = errors.Join(err, sendErr); err != nil {
		rep.Error = err.Error()
		ctlSend(ctlFD, rep)
	}
}
