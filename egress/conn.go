package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// maxHeaderBytes bounds a request's header: the client reader's buffer,
// which holds the whole header before it is parsed.
const maxHeaderBytes = 32 << 10

// peer is one end of a proxied exchange: a connection and its buffers.
type peer struct {
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
}

func newPeer(c net.Conn, readSize int) *peer {
	return &peer{conn: c, br: bufio.NewReaderSize(c, readSize), bw: bufio.NewWriterSize(c, 16<<10)}
}

// readRequest reads one request header from a client: it waits up to idle
// for the first byte (0: no wait of its own), then up to header for the
// whole header. An absolute-form request whose Host header names another
// host is refused (host_mismatch). io.EOF means the client closed.
func (p *peer) readRequest(idle, header time.Duration) (*http.Request, error) {
	if idle > 0 {
		_ = p.conn.SetReadDeadline(time.Now().Add(idle))
		if _, err := p.br.Peek(1); err != nil {
			return nil, err
		}
	}
	_ = p.conn.SetReadDeadline(time.Now().Add(header))
	defer p.conn.SetReadDeadline(time.Time{})
	raw, err := peekHeader(p.br)
	if err != nil {
		return nil, err
	}
	req, err := http.ReadRequest(p.br)
	if err != nil {
		return nil, refuse(ReasonBadRequest, "malformed request: "+err.Error())
	}
	if req.URL.IsAbs() {
		for _, h := range hostHeaders(raw) {
			if !sameHostPort(h, req.URL.Host, req.URL.Scheme) {
				return req, refuse(ReasonHostMismatch, fmt.Sprintf("Host header %q, request URI host %q", h, req.URL.Host))
			}
		}
	}
	return req, nil
}

// peekHeader waits until br holds a whole request header and returns it
// without consuming it. A header larger than br's buffer is refused.
func peekHeader(br *bufio.Reader) ([]byte, error) {
	for {
		buf, _ := br.Peek(br.Buffered())
		if i := headerEnd(buf); i >= 0 {
			return buf[:i], nil
		}
		if br.Buffered() == br.Size() {
			return nil, refuse(ReasonBadRequest, "request header too large")
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			if br.Buffered() > 0 && errors.Is(err, io.EOF) {
				return nil, refuse(ReasonBadRequest, "connection closed inside a request header")
			}
			return nil, err
		}
	}
}

// headerEnd is the index just past the blank line ending a header, or -1.
func headerEnd(b []byte) int {
	for i := bytes.IndexByte(b, '\n'); i >= 0; {
		rest := b[i+1:]
		switch {
		case bytes.HasPrefix(rest, []byte("\n")):
			return i + 2
		case bytes.HasPrefix(rest, []byte("\r\n")):
			return i + 3
		}
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
	}
	return -1
}

// hostHeaders returns the values of the Host lines of a raw header.
func hostHeaders(raw []byte) []string {
	var hosts []string
	lines := strings.Split(string(raw), "\n")
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "host") {
			hosts = append(hosts, strings.TrimSpace(value))
		}
	}
	return hosts
}

// sameHostPort compares two authorities ("host[:port]"), a missing port
// being the scheme's default.
func sameHostPort(a, b, scheme string) bool {
	ah, ap := splitAuthority(a, scheme)
	bh, bp := splitAuthority(b, scheme)
	return ah == bh && ap == bp
}

func splitAuthority(a, scheme string) (string, string) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		host, port = a, ""
	}
	if port == "" {
		port = "80"
		if scheme == "https" {
			port = "443"
		}
	}
	return normalizeHost(strings.Trim(host, "[]")), port
}

// serveConn serves one client connection and records its Decision.
func (s *session) serveConn(c net.Conn, start time.Time) {
	cc := &clientConn{s: s, cl: newPeer(c, maxHeaderBytes), rec: s.newRecord(start)}
	defer func() { s.emit(cc.rec) }()
	req, err := cc.cl.readRequest(0, s.g.headerTimeout)
	switch {
	case err != nil && req != nil: // an absolute-form request whose Host differs
		host, port, _ := uriTarget(req)
		cc.rec.d.Mode, cc.rec.d.Host, cc.rec.d.Port = ModeHTTP, host, port
		cc.refuse(host, port, asRefusal(err), err)
	case err != nil:
		cc.refuse("", 0, asRefusal(err), err)
	case req.Method == http.MethodConnect:
		cc.connect(req)
	case req.URL.IsAbs():
		cc.rec.d.Mode = ModeHTTP
		x := &exchange{cc: cc, cl: cc.cl}
		defer x.close()
		x.run(req)
	default:
		cc.refuse("", 0, refuse(ReasonBadRequest, "origin-form request to the proxy: "+req.Method+" "+req.RequestURI), nil)
	}
}

// clientConn is a connection from the sandbox and its current record.
type clientConn struct {
	s   *session
	cl  *peer
	rec *record
}

// refuse answers a refusal on the client connection, if it is one (a
// closed or silent client gets no answer), and closes it gracefully.
func (cc *clientConn) refuse(host string, port int, f *refusal, err error) {
	if f == nil {
		cc.rec.refuse(refuse(ReasonBadRequest, "no request: "+errString(err)))
		return
	}
	cc.rec.refuse(f)
	writeRefusal(cc.cl.bw, host, port, f)
	if cc.cl.bw.Flush() == nil {
		lingerClose(cc.cl.conn)
	}
}

// connect serves a CONNECT request: check, dial, answer 200, then look at
// the client's first bytes and tunnel, forward HTTP, or intercept.
func (cc *clientConn) connect(req *http.Request) {
	rec := cc.rec
	rec.d.Mode = ModeTunnel
	host, port, f := parseTarget(req.RequestURI)
	rec.d.Host, rec.d.Port = host, port
	if f != nil {
		cc.refuse(host, port, f, nil)
		return
	}
	up, f := cc.s.open(host, port, rec)
	if f != nil {
		cc.refuse(host, port, f, nil)
		return
	}
	defer cc.s.untrack(up)
	if _, err := io.WriteString(cc.cl.conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		rec.fail("client: " + err.Error())
		return
	}
	cc.afterConnect(host, port, up)
}

// open checks host:port against the run's rules, resolves it and dials
// it; the connection is tracked by the session. Every check that needs no
// answer from the resolver (the rule, host and port; the run's cap on
// distinct names) comes before the lookup, so a name refused for them
// never reaches the host's resolver.
func (s *session) open(host string, port int, rec *record) (net.Conn, *refusal) {
	rule, ok := s.match(host, port)
	if !ok {
		return nil, refuse(ReasonNotAllowed, "no rule of the run matches")
	}
	rec.rule = rule.String()
	if _, ok := s.g.pinned(host, port); !ok {
		if f := s.names.admit(host); f != nil {
			return nil, f
		}
	}
	r, f := s.g.resolve(s.ctx, host, port)
	if len(r.addrs) > 0 {
		rec.d.Addr = netip.AddrPortFrom(r.addrs[0], uint16(port)).String()
	}
	if f != nil {
		return nil, f
	}
	c, addr, err := s.g.dial(s.ctx, r, port)
	rec.d.Addr = addr
	if err != nil {
		return nil, refuse(ReasonDialFailed, err.Error())
	}
	if !s.track(c) {
		c.Close()
		return nil, refuse(ReasonDialFailed, "gateway stopping")
	}
	return c, nil
}

func (s *session) match(host string, port int) (Rule, bool) {
	for _, r := range s.run.rules() {
		if r.Match(host, port) {
			return r, true
		}
	}
	return Rule{}, false
}

// parseTarget reads a CONNECT target, host:port.
func parseTarget(authority string) (string, int, *refusal) {
	h, p, err := net.SplitHostPort(authority)
	if err != nil {
		return "", 0, refuse(ReasonBadRequest, "CONNECT target is not host:port")
	}
	port, err := parsePort(p)
	if err != nil {
		return "", 0, refuse(ReasonBadRequest, "CONNECT target: "+err.Error())
	}
	return checkTarget(h, port)
}

// checkTarget normalizes a target host and refuses IP literals and names
// that are not DNS names.
func checkTarget(h string, port int) (string, int, *refusal) {
	host := normalizeHost(h)
	if ipLiteral(host) {
		return host, port, refuse(ReasonIPLiteral, "target is an IP address")
	}
	if err := checkHostname(host); err != nil {
		return "", port, refuse(ReasonBadRequest, "target host: "+err.Error())
	}
	return host, port, nil
}

func ipLiteral(host string) bool {
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return true
	}
	labels := strings.Split(host, ".")
	return numeric(labels[len(labels)-1])
}

// writeRefusal writes a refusal as an HTTP response that names the
// target, the reason code and its meaning (never the detail, which may
// hold addresses).
func writeRefusal(w io.Writer, host string, port int, f *refusal) {
	target := "request"
	if host != "" {
		target = net.JoinHostPort(host, strconv.Itoa(port))
	}
	verb := "refused"
	status := f.status()
	if status >= 500 {
		verb = "failed"
	}
	body := fmt.Sprintf("agent-runner egress: %s %s (%s: %s)\n", target, verb, f.reason, reasonText[f.reason])
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// lingerClose half-closes c and reads what the client still sends for a
// moment, so that an answer written just before is not lost to a reset.
func lingerClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, _ = io.CopyN(io.Discard, c, 64<<10)
}

func errString(err error) string {
	if err == nil {
		return "connection closed"
	}
	return err.Error()
}
