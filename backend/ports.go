package backend

import (
	"context"
	"net"

	"github.com/agent-runner/agent-runner/job"
)

// PortDialer is implemented by a Sandbox whose servers a caller can
// reach without giving the sandbox a network of its own: DialPort
// connects to 127.0.0.1:port as the sandbox's processes see it (a
// server one of them listens on) and returns the connection. The
// address is always the sandbox's loopback; only the port is the
// caller's.
//
// Errors: a port outside 1-65535 is validation.invalid_request;
// nothing accepting on it (refused, or no answer in time)
// session.port_unreachable; a deleted sandbox job.not_found. In a
// paused sandbox a DialPort may wait until it is resumed or ctx ends
// (run.canceled).
type PortDialer interface {
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// CheckPort refuses a port outside 1-65535 (validation.invalid_request).
func CheckPort(port int) error {
	if port < 1 || port > 65535 {
		return job.Errorf(job.CodeInvalidRequest, "port %d is not a TCP port (1-65535)", port).With("field", "port").With("port", port)
	}
	return nil
}

// PortUnreachable is session.port_unreachable for port, with why
// (refused, timeout or the error's text).
func PortUnreachable(port int, reason string) error {
	return job.Errorf(job.CodeSessionPortUnreachable, "nothing accepts connections on port %d in the sandbox (%s)", port, reason).
		With("port", port).With("reason", reason)
}
