package sessionremote

import (
	"context"
	"net"
	"sync"

	"github.com/agent-runner/agent-runner/natsconn"
)

// trackedConn is a connection to a worker, forgotten when closed.
type trackedConn struct {
	net.Conn
	r    *Router
	inst instance
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.r.mu.Lock()
		delete(c.r.conns[c.inst], c)
		c.r.mu.Unlock()
	})
	return c.Conn.Close()
}

// dial opens a connection to the worker instance named by addr's host
// (the forwarded request's URL).
func (r *Router) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	inst := instance(host)
	nc, err := natsconn.Dial(ctx, r.cfg.Conn, inst.addr(), r.cfg.Conns)
	if err != nil {
		return nil, err
	}
	c := &trackedConn{Conn: nc, r: r, inst: inst}
	r.mu.Lock()
	if w := r.workers[inst]; w != nil && w.lost {
		r.mu.Unlock()
		nc.Close()
		return nil, natsconn.ErrPeerLost
	}
	if r.conns[inst] == nil {
		r.conns[inst] = map[*trackedConn]struct{}{}
	}
	r.conns[inst][c] = struct{}{}
	r.mu.Unlock()
	return c, nil
}
