package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
)

// intercept terminates the client's TLS with a leaf for host signed by
// the run CA, opens verified TLS to the upstream (SNI host, the resolved
// or pinned address already dialed), and forwards HTTP/1.1 requests with
// the bound secrets' placeholders replaced in their header values.
func (cc *clientConn) intercept(host string, port int, up net.Conn, hello []byte, bs []Binding) {
	s, rec := cc.s, cc.rec
	rec.d.Mode = ModeIntercept
	leaf, err := s.ca.leaf(host)
	if err != nil {
		rec.fail("leaf certificate: " + err.Error())
		return
	}
	client := tls.Server(&replayConn{Conn: cc.cl.conn, r: io.MultiReader(bytes.NewReader(hello), cc.cl.br)}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	defer client.Close()
	ctx, cancel := context.WithTimeout(s.ctx, s.g.headerTimeout)
	err = client.HandshakeContext(ctx)
	cancel()
	if err != nil {
		rec.fail("client TLS handshake: " + err.Error())
		return
	}
	upstream := tls.Client(&countConn{Conn: up, rec: rec}, &tls.Config{
		ServerName:         host,
		RootCAs:            s.g.upstreamRoots,
		NextProtos:         []string{"http/1.1"},
		MinVersion:         tls.VersionTLS12,
		ClientSessionCache: s.g.sessions,
	})
	defer upstream.Close()
	cl := newPeer(client, maxHeaderBytes)
	ctx, cancel = context.WithTimeout(s.ctx, s.g.dialTimeout)
	err = upstream.HandshakeContext(ctx)
	cancel()
	if err != nil {
		f := refuse(ReasonUpstreamTLS, err.Error())
		rec.refuse(f)
		// Answer the first request so that the client can read why.
		if _, rerr := cl.readRequest(0, s.g.headerTimeout); rerr == nil {
			writeRefusal(cl.bw, host, port, f)
			_ = cl.bw.Flush()
		}
		return
	}
	req, err := cl.readRequest(s.g.idleTimeout, s.g.headerTimeout)
	x := &exchange{cc: cc, cl: cl, fixed: true, host: host, port: port, scheme: "https", inject: bs,
		up: newPeer(upstream, 16<<10)}
	if err != nil {
		if f := asRefusal(err); f != nil {
			x.refuse(f)
		}
		return
	}
	x.run(req)
}
