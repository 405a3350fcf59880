package natsconn

import (
	"net"
	"sync"

	"github.com/nats-io/nats.go"
)

// Backlog is how many connections a listener holds that Accept has not
// taken; a dial beyond it is refused.
const Backlog = 128

// Listener takes the connections dialed to its Addr.
type Listener struct {
	nc      *nats.Conn
	cfg     Config
	addr    Addr
	sub     *nats.Subscription
	accepts chan *conn
	done    chan struct{}
	once    sync.Once
}

var _ net.Listener = (*Listener)(nil)

// Listen hears dials on addr.To's dial subject. The subscription is in
// place on the server when Listen returns.
func Listen(nc *nats.Conn, addr Addr, cfg Config) (*Listener, error) {
	l := &Listener{nc: nc, cfg: cfg.withDefaults(), addr: addr, accepts: make(chan *conn, Backlog), done: make(chan struct{})}
	sub, err := nc.Subscribe(addr.To+".dial", l.dial)
	if err != nil {
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	l.sub = sub
	return l, nil
}

// dial answers one dial (the subscription's callback, one at a time, so
// only it adds to accepts).
func (l *Listener) dial(m *nats.Msg) {
	cid := string(m.Data)
	if !validCID(cid) {
		return
	}
	c := newConn(l.nc, l.cfg, l.addr.From+".c."+cid, l.addr, Addr{To: l.addr.From, From: l.addr.To})
	sub, err := l.nc.Subscribe(l.addr.To+".c."+cid, c.deliver)
	if err != nil {
		return
	}
	c.sub = sub
	if isClosed(l.done) || len(l.accepts) == cap(l.accepts) {
		c.send(frameRefuse, []byte("the listener is closed or its backlog is full"))
		c.Close()
		return
	}
	c.accepted = true
	// Accept goes first, so the dialer sees it before any data.
	if err := c.send(frameAccept, nil); err != nil {
		c.Close()
		return
	}
	go c.keepAlive()
	l.accepts <- c
	if isClosed(l.done) {
		l.drain()
	}
}

// validCID reports whether s can be a connection id: one subject token
// of letters and digits (Dial's rand.Text).
func validCID(s string) bool {
	if len(s) < 8 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !('A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accepts:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops hearing dials and closes the connections not yet
// accepted; accepted ones stay open.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.sub.Unsubscribe()
		l.drain()
	})
	return nil
}

// drain closes the connections Accept did not take.
func (l *Listener) drain() {
	for {
		select {
		case c := <-l.accepts:
			c.Close()
		default:
			return
		}
	}
}

// Addr is the listener's address.
func (l *Listener) Addr() net.Addr { return l.addr }
