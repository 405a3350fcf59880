package natsconn

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Config tunes a connection; zero fields take the defaults.
type Config struct {
	// Window is the most bytes in flight one way that the reader has
	// not consumed (default 1 MiB).
	Window int
	// MaxFrame is the largest data frame (default 64 KiB; NATS's
	// maximum payload is larger).
	MaxFrame int
	// KeepAlive is how long a side that sent nothing waits before it
	// pings (default 1 s); PeerTimeout how long a side that heard
	// nothing waits before it gives the connection up with ErrPeerLost,
	// and how long a Dial waits when its context has no deadline
	// (default 5 s).
	KeepAlive, PeerTimeout time.Duration
}

// Defaults of Config's zero fields.
const (
	DefaultWindow      = 1 << 20
	DefaultMaxFrame    = 64 << 10
	DefaultKeepAlive   = time.Second
	DefaultPeerTimeout = 5 * time.Second
)

func (c Config) withDefaults() Config {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.MaxFrame <= 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.PeerTimeout <= 0 {
		c.PeerTimeout = DefaultPeerTimeout
	}
	return c
}

// Addr names a listener: To is the subject prefix it hears on (dials,
// and the frames of its connections), From the prefix it answers on.
type Addr struct {
	To, From string
}

// Network is "nats".
func (a Addr) Network() string { return "nats" }

func (a Addr) String() string { return a.To }

// conn is one side of a connection.
type conn struct {
	nc            *nats.Conn
	cfg           Config
	out           string // the peer's subject
	local, remote Addr
	sub           *nats.Subscription

	// smu orders sends: a frame's sequence number is its publish order.
	smu      sync.Mutex
	outSeq   uint64
	sentLast atomic.Int64 // unix nanoseconds of the last send

	mu sync.Mutex
	// changed is closed (and replaced) whenever the state below
	// changes, waking every waiter.
	changed chan struct{}
	// buf holds received bytes not yet read (buffered of them).
	buf      [][]byte
	buffered int
	inSeq    uint64
	heard    time.Time
	// consumed counts the bytes read, credited the count last sent to
	// the peer; sent the bytes written, acked the peer's last credit.
	consumed, credited, sent, acked int64
	accepted, peerClosed, closed    bool
	// err ends the connection both ways (ErrPeerLost, ErrFrameLost,
	// ErrProtocol, a failed publish).
	err error

	rd, wd *deadline
	done   chan struct{} // closed by Close
}

var _ net.Conn = (*conn)(nil)

func newConn(nc *nats.Conn, cfg Config, out string, local, remote Addr) *conn {
	return &conn{
		nc: nc, cfg: cfg, out: out, local: local, remote: remote,
		changed: make(chan struct{}), heard: time.Now(),
		rd: newDeadline(), wd: newDeadline(), done: make(chan struct{}),
	}
}

// broadcast wakes every waiter (mu held).
func (c *conn) broadcast() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// fail ends the connection with err, unless it already ended (mu held).
func (c *conn) fail(err error) {
	if c.err == nil {
		c.err = err
	}
	c.broadcast()
}

// deliver takes one frame from the peer (the subscription's callback:
// frames come one at a time, in order).
func (c *conn) deliver(m *nats.Msg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.closed {
		return
	}
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		c.fail(ErrNoListener)
		return
	}
	t, seq, p, ok := decode(m.Data)
	switch {
	case !ok:
		c.fail(ErrProtocol)
		return
	case seq != c.inSeq+1:
		c.fail(ErrFrameLost)
		return
	}
	c.inSeq, c.heard = seq, time.Now()
	switch t {
	case frameAccept:
		c.accepted = true
	case frameRefuse:
		c.fail(fmt.Errorf("%w: %s", ErrRefused, p))
		return
	case frameData:
		// The peer may send Window bytes beyond the credit it was given.
		if c.consumed+int64(c.buffered+len(p))-c.credited > int64(c.cfg.Window) {
			c.fail(fmt.Errorf("%w: more bytes than the window", ErrProtocol))
			return
		}
		if len(p) > 0 {
			c.buf = append(c.buf, p)
			c.buffered += len(p)
		}
	case frameCredit:
		if len(p) != 8 {
			c.fail(ErrProtocol)
			return
		}
		v := int64(binary.BigEndian.Uint64(p))
		if v > c.sent {
			c.fail(fmt.Errorf("%w: credit for bytes never sent", ErrProtocol))
			return
		}
		c.acked = max(c.acked, v)
	case framePing:
	case frameClose:
		c.peerClosed = true
	default:
		c.fail(ErrProtocol)
		return
	}
	c.broadcast()
}

// send publishes one frame to the peer.
func (c *conn) send(t byte, p []byte) error {
	c.smu.Lock()
	defer c.smu.Unlock()
	c.outSeq++
	c.sentLast.Store(time.Now().UnixNano())
	return c.nc.Publish(c.out, encode(t, c.outSeq, p))
}

// Read reads what the peer wrote: io.EOF once it closed and everything
// it sent was read.
func (c *conn) Read(b []byte) (int, error) {
	c.mu.Lock()
	for {
		switch {
		case c.closed:
			c.mu.Unlock()
			return 0, net.ErrClosed
		case isClosed(c.rd.wait()):
			c.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		case c.buffered > 0:
			n := c.take(b)
			credit := int64(-1)
			if c.consumed-c.credited >= int64(c.cfg.Window/4) {
				credit, c.credited = c.consumed, c.consumed
			}
			c.mu.Unlock()
			if credit >= 0 {
				var v [8]byte
				binary.BigEndian.PutUint64(v[:], uint64(credit))
				if err := c.send(frameCredit, v[:]); err != nil {
					c.mu.Lock()
					c.fail(err)
					c.mu.Unlock()
				}
			}
			return n, nil
		case c.err != nil:
			err := c.err
			c.mu.Unlock()
			return 0, err
		case c.peerClosed:
			c.mu.Unlock()
			return 0, io.EOF
		}
		changed, rd := c.changed, c.rd.wait()
		c.mu.Unlock()
		select {
		case <-changed:
		case <-rd:
		}
		c.mu.Lock()
	}
}

// take moves buffered bytes into b (mu held).
func (c *conn) take(b []byte) int {
	n := 0
	for n < len(b) && len(c.buf) > 0 {
		k := copy(b[n:], c.buf[0])
		n += k
		if k == len(c.buf[0]) {
			c.buf[0] = nil
			c.buf = c.buf[1:]
		} else {
			c.buf[0] = c.buf[0][k:]
		}
	}
	c.buffered -= n
	c.consumed += int64(n)
	return n
}

// Write sends b, waiting for the peer's credit when the window is full.
func (c *conn) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		chunk, err := c.reserve(len(b))
		if err != nil {
			return n, err
		}
		if err := c.send(frameData, b[:chunk]); err != nil {
			c.mu.Lock()
			c.fail(err)
			c.mu.Unlock()
			return n, err
		}
		n += chunk
		b = b[chunk:]
	}
	return n, nil
}

// reserve waits until the window has room and takes up to want bytes of
// it.
func (c *conn) reserve(want int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case c.closed:
			return 0, net.ErrClosed
		case c.err != nil:
			return 0, c.err
		case c.peerClosed:
			return 0, ErrPeerClosed
		case isClosed(c.wd.wait()):
			return 0, os.ErrDeadlineExceeded
		}
		if room := int64(c.cfg.Window) - (c.sent - c.acked); room > 0 {
			chunk := int(min(int64(want), room, int64(c.cfg.MaxFrame)))
			c.sent += int64(chunk)
			return chunk, nil
		}
		changed, wd := c.changed, c.wd.wait()
		c.mu.Unlock()
		select {
		case <-changed:
		case <-wd:
		}
		c.mu.Lock()
	}
}

// Close tells the peer, stops hearing it and fails pending calls with
// net.ErrClosed. Bytes written before are delivered before the close.
func (c *conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.broadcast()
	c.mu.Unlock()
	c.send(frameClose, nil)
	if c.sub != nil {
		c.sub.Unsubscribe()
	}
	close(c.done)
	return nil
}

// keepAlive pings when nothing was sent for KeepAlive and fails the
// connection when nothing was heard for PeerTimeout, until it closes or
// fails.
func (c *conn) keepAlive() {
	t := time.NewTicker(min(c.cfg.KeepAlive, c.cfg.PeerTimeout) / 2)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case now := <-t.C:
			if now.Sub(time.Unix(0, c.sentLast.Load())) >= c.cfg.KeepAlive {
				if err := c.send(framePing, nil); err != nil {
					c.mu.Lock()
					c.fail(err)
					c.mu.Unlock()
				}
			}
			c.mu.Lock()
			if c.err == nil && now.Sub(c.heard) > c.cfg.PeerTimeout {
				c.fail(ErrPeerLost)
			}
			failed := c.err != nil
			c.mu.Unlock()
			if failed {
				return // nothing more to watch for; Close unsubscribes
			}
		}
	}
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

func (c *conn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *conn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }
