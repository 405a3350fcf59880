package egress

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// afterConnect looks at the first bytes a client sends into an open
// CONNECT tunnel. A TLS ClientHello must name the CONNECT host; the
// connection is then intercepted (a secret is bound to the host) or passed
// through. Plain HTTP is forwarded request by request with its Host
// checked. Anything else is closed. A refusal here closes the tunnel
// without an answer: the client already has its 200.
func (cc *clientConn) afterConnect(host string, port int, up net.Conn) {
	rec, cl := cc.rec, cc.cl
	_ = cl.conn.SetReadDeadline(time.Now().Add(cc.s.g.headerTimeout))
	first, err := cl.br.Peek(1)
	if err != nil {
		rec.fail("client sent nothing: " + err.Error())
		return
	}
	switch c := first[0]; {
	case c == 0x16: // TLS handshake record
		sni, hello, err := sniffSNI(cl.br)
		_ = cl.conn.SetReadDeadline(time.Time{})
		switch {
		case err != nil:
			rec.refuse(refuse(ReasonNotTLSOrHTTP, "malformed TLS ClientHello: "+err.Error()))
		case sni == "":
			rec.refuse(refuse(ReasonSNIMismatch, "ClientHello has no server name"))
		case normalizeHost(sni) != host:
			rec.refuse(refuse(ReasonSNIMismatch, fmt.Sprintf("ClientHello names %q", sni)))
		default:
			if bs := bound(cc.s.run.Bindings, host, port); len(bs) > 0 {
				cc.intercept(host, port, up, hello, bs)
				return
			}
			cc.tunnel(up, hello)
		}
	case c >= 'A' && c <= 'Z': // an HTTP method
		_ = cl.conn.SetReadDeadline(time.Time{})
		req, err := cl.readRequest(0, cc.s.g.headerTimeout)
		if err != nil {
			f := asRefusal(err)
			if f == nil || f.reason == ReasonBadRequest {
				f = refuse(ReasonNotTLSOrHTTP, "not an HTTP/1.x request: "+errString(err))
			}
			rec.refuse(f)
			return
		}
		rec.d.Mode = ModeHTTP
		x := &exchange{cc: cc, cl: cl, fixed: true, host: host, port: port, scheme: "http",
			up: newPeer(&countConn{Conn: up, rec: rec}, 16<<10)}
		x.run(req)
	default:
		rec.refuse(refuse(ReasonNotTLSOrHTTP, fmt.Sprintf("first byte 0x%02x", c)))
	}
}

// tunnel passes bytes both ways untouched, starting with the ClientHello
// already read. Plain connections are spliced by the kernel where it can.
func (cc *clientConn) tunnel(up net.Conn, hello []byte) {
	rec, cl := cc.rec, cc.cl
	n, err := up.Write(hello)
	rec.up.Add(int64(n))
	if err == nil && cl.br.Buffered() > 0 {
		buffered, _ := cl.br.Peek(cl.br.Buffered())
		n, err = up.Write(buffered)
		rec.up.Add(int64(n))
		_, _ = cl.br.Discard(len(buffered))
	}
	if err != nil {
		rec.fail("upstream: " + err.Error())
		return
	}
	pipe(cl.conn, cl.conn, up, up, rec, cc.s.g.idleTimeout)
}

// pipe copies client->upstream and upstream->client until both directions
// end, half-closing each side as its source ends. Once the upstream has
// finished, the client gets idle to finish too.
func pipe(clientR io.Reader, client net.Conn, upR io.Reader, up net.Conn, rec *record, idle time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, _ := io.Copy(up, clientR)
		rec.up.Add(n)
		closeWrite(up)
	}()
	n, _ := io.Copy(client, upR)
	rec.down.Add(n)
	closeWrite(client)
	_ = client.SetReadDeadline(time.Now().Add(idle))
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

var errSniffed = errors.New("egress: ClientHello read")

// sniffSNI reads a TLS ClientHello from r with crypto/tls's own parser
// and returns its server name and every byte it read, to be replayed.
func sniffSNI(r io.Reader) (sni string, read []byte, err error) {
	var rec bytes.Buffer
	seen := false
	cfg := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni, seen = h.ServerName, true
		return nil, errSniffed
	}}
	herr := tls.Server(&sniffConn{r: io.TeeReader(r, &rec)}, cfg).Handshake()
	if !seen {
		return "", rec.Bytes(), herr
	}
	return sni, rec.Bytes(), nil
}

// sniffConn feeds a TLS server the client's bytes and swallows what it
// writes back (an alert).
type sniffConn struct{ r io.Reader }

func (c *sniffConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *sniffConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *sniffConn) Close() error                     { return nil }
func (c *sniffConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *sniffConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *sniffConn) SetDeadline(time.Time) error      { return nil }
func (c *sniffConn) SetReadDeadline(time.Time) error  { return nil }
func (c *sniffConn) SetWriteDeadline(time.Time) error { return nil }

// replayConn reads from r (bytes already taken from the connection, then
// the connection) and writes to the connection.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }
