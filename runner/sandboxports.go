package runner

import (
	"context"
	"net"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// DialPort connects to 127.0.0.1:port as the sandbox's processes see
// it (backend.PortDialer: a server one of them listens on). A backend
// whose sandboxes cannot be dialled is backend.unavailable.
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	d, ok := s.sb.(backend.PortDialer)
	if !ok {
		return nil, job.Errorf(job.CodeBackendUnavail, "backend %s cannot reach a sandbox's ports", s.b.Kind()).With("backend", s.b.Kind())
	}
	return d.DialPort(ctx, port)
}
