package httpapi

import (
	"net"
	"sync"
)

// DefaultMaxConnsPerIP is serve's default --max-conns-per-ip.
const DefaultMaxConnsPerIP = 256

// LimitConnsPerIP wraps ln so that one client IP holds at most max open
// connections: a connection over it is closed as soon as it is accepted
// (the client sees it reset), and the listener goes on accepting. max <= 0
// means no limit. Hijacked connections (WebSocket) count until closed.
func LimitConnsPerIP(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, max: max, open: map[string]int{}}
}

type limitListener struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		ok := l.open[ip] < l.max
		if ok {
			l.open[ip]++
		}
		l.mu.Unlock()
		if ok {
			return &limitConn{Conn: c, release: func() { l.release(ip) }}, nil
		}
		if tc, isTCP := c.(*net.TCPConn); isTCP {
			tc.SetLinger(0) // reset: no TIME_WAIT left behind for a flood
		}
		c.Close()
	}
}

func (l *limitListener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// limitConn gives its slot back once, on the first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite keeps net/http's graceful half-close working through the
// wrapper.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
