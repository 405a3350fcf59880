package session

import (
	"context"
	"net"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// DialPort connects to a server listening on 127.0.0.1:port inside
// running sandbox id (its own loopback: the sandbox still has no
// network of its own) and returns the connection, which the caller
// closes; it ends when the sandbox does. A port outside 1-65535 is
// validation.invalid_request, nothing listening
// session.port_unreachable, a paused or ended sandbox
// session.not_running, an unknown one job.not_found. A sandbox its
// idle timeout paused is resumed, and the connection counts as an
// attached client until it is closed (docs/sessions.md "Idle").
func (s *Service) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	if err := backend.CheckPort(port); err != nil {
		return nil, err
	}
	h, err := s.running(id, StateRunning)
	if err != nil {
		return nil, err
	}
	sb := h.sb
	h.mu.Unlock()
	c, err := sb.DialPort(ctx, port)
	if job.CodeOf(err) == job.CodeJobNotFound {
		// Ended while the connect was on its way.
		if rec, gerr := s.Get(id); gerr == nil && !rec.State.Live() {
			return nil, notRunning(rec)
		}
	}
	if err != nil {
		return nil, err
	}
	return &heldConn{Conn: c, release: s.hold(h)}, nil
}

// heldConn is a connection into a sandbox that holds it from idling
// until it is closed.
type heldConn struct {
	net.Conn
	release func()
}

// Close closes the connection and lets the sandbox idle again.
func (c *heldConn) Close() error {
	c.release()
	return c.Conn.Close()
}
