package taskapi

import (
	"net"
	"sync"
	"time"
)

// Limits of one task's children socket: a task (an agent that may be
// hostile) gets at most ChildSocketConns connections at once, and idle or
// slow ones are closed, so it cannot hold serve's file descriptors or
// goroutines and starve the main API.
const (
	ChildSocketConns             = 16
	childSocketReadHeaderTimeout = 5 * time.Second
	childSocketReadTimeout       = 30 * time.Second
	childSocketWriteTimeout      = 2 * time.Minute
	childSocketIdleTimeout       = 30 * time.Second
)

// capListener accepts at most max connections at once; one over the cap
// is closed as soon as it is accepted (the client sees EOF or a reset),
// not queued, so a flood of connections costs one descriptor at a time.
type capListener struct {
	net.Listener
	slots chan struct{}
}

func newCapListener(ln net.Listener, max int) net.Listener {
	return &capListener{Listener: ln, slots: make(chan struct{}, max)}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			c.Close()
		}
	}
}

// slotConn gives its slot back once, when closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
