package localprocess

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

var _ backend.PortDialer = (*Sandbox)(nil)

// dialTimeout bounds a connect to a port that does not answer.
const dialTimeout = 10 * time.Second

// DialPort implements backend.PortDialer: a local_process sandbox has no
// network of its own, so its loopback is the host's and the port is
// dialled from the runner (only under the operator's unsafe flag, as
// every use of this backend). In a paused sandbox it waits for Resume.
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if err := backend.CheckPort(port); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.execs.Done()
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	switch {
	case err == nil:
		return c, nil
	case ctx.Err() != nil:
		return nil, job.Wrap(job.CodeRunCanceled, ctx.Err(), "canceled while connecting to the sandbox's port")
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, backend.PortUnreachable(port, "refused")
	}
	return nil, backend.PortUnreachable(port, err.Error())
}
