package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// exchange forwards HTTP/1.1 requests from a client to an upstream one at
// a time, streaming each body and each response without buffering it.
// With fixed set, every request must name host:port (a CONNECT target);
// otherwise each absolute-URI request picks, checks and dials its target.
type exchange struct {
	cc     *clientConn
	cl     *peer
	fixed  bool
	host   string
	port   int
	scheme string    // of requests to the fixed target: "http" or "https"
	inject []Binding // secrets bound to the fixed target (intercept)

	up    *peer // current upstream
	upRaw net.Conn
	upKey string
}

// run forwards req and the requests after it until either side closes,
// a response ends the connection, or a request is refused.
func (x *exchange) run(req *http.Request) {
	g := x.cc.s.g
	for {
		if !x.roundTrip(req) {
			return
		}
		var err error
		req, err = x.cl.readRequest(g.idleTimeout, g.headerTimeout)
		if err != nil {
			if f := asRefusal(err); f != nil {
				x.refuse(f)
			}
			return
		}
	}
}

func (x *exchange) close() {
	if x.upRaw != nil {
		x.cc.s.untrack(x.upRaw)
	}
}

// refuse answers f to the client and ends the exchange.
func (x *exchange) refuse(f *refusal) {
	x.cc.rec.refuse(f)
	writeRefusal(x.cl.bw, x.cc.rec.d.Host, x.cc.rec.d.Port, f)
	if x.cl.bw.Flush() == nil {
		lingerClose(x.cl.conn)
	}
}

// roundTrip forwards one request and its response; false ends the
// exchange.
func (x *exchange) roundTrip(req *http.Request) bool {
	if f := x.target(req); f != nil {
		x.refuse(f)
		return false
	}
	rec := x.cc.rec
	expect := prepare(req, x.inject)
	if expect {
		if _, err := io.WriteString(x.cl.bw, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil || x.cl.bw.Flush() != nil {
			return false
		}
	}
	if req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0 {
		req.Body = &flushingBody{ReadCloser: req.Body, w: x.up.bw}
	}
	err := req.Write(bufferedWriter{x.up.bw})
	if err == nil {
		err = x.up.bw.Flush()
	}
	if err != nil {
		rec.fail("forwarding request: " + err.Error())
		return false
	}
	resp, err := x.readResponse(req)
	if err != nil {
		rec.fail("reading response: " + err.Error())
		x.answerBadGateway()
		return false
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		writeHead(x.cl.bw, resp)
		if x.cl.bw.Flush() == nil {
			// x.up counts its own bytes: pipe's counts go to a record of its own
			pipe(x.cl.br, x.cl.conn, x.up.br, x.up.conn, &record{}, x.cc.s.g.idleTimeout)
		}
		return false
	}
	if resp.Body != nil && resp.Body != http.NoBody && resp.ContentLength != 0 {
		resp.Body = &flushingBody{ReadCloser: resp.Body, w: x.cl.bw}
	}
	err = resp.Write(bufferedWriter{x.cl.bw})
	resp.Body.Close()
	if err == nil {
		err = x.cl.bw.Flush()
	}
	if err != nil {
		rec.fail("relaying response: " + err.Error())
		return false
	}
	return !req.Close && !resp.Close
}

// readResponse reads the final response to req, relaying informational
// (1xx) responses before it, 101 aside.
func (x *exchange) readResponse(req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(x.up.br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		writeHead(x.cl.bw, resp)
		if err := x.cl.bw.Flush(); err != nil {
			return nil, err
		}
	}
}

// answerBadGateway tells the client its upstream failed, when nothing of
// a response has been written yet.
func (x *exchange) answerBadGateway() {
	const body = "agent-runner egress: the upstream closed or sent no valid HTTP/1.1 response\n"
	fmt.Fprintf(x.cl.bw, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	_ = x.cl.bw.Flush()
}

// target checks the request's target and makes x.up its upstream.
func (x *exchange) target(req *http.Request) *refusal {
	if x.fixed {
		if req.URL.IsAbs() && !sameHostPort(req.URL.Host, net.JoinHostPort(x.host, strconv.Itoa(x.port)), x.scheme) {
			return refuse(ReasonHostMismatch, fmt.Sprintf("request URI host %q", req.URL.Host))
		}
		if !hostNames(req.Host, x.host, x.port) {
			return refuse(ReasonHostMismatch, fmt.Sprintf("Host header %q", req.Host))
		}
		return nil
	}
	host, port, f := uriTarget(req)
	key := net.JoinHostPort(host, strconv.Itoa(port))
	if f == nil && x.up != nil && key == x.upKey {
		return nil
	}
	s := x.cc.s
	if x.up != nil { // a new target: the previous one's record ends here
		s.untrack(x.upRaw)
		x.up, x.upRaw = nil, nil
		s.emit(x.cc.rec)
		x.cc.rec = s.newRecord(time.Now())
		x.cc.rec.d.Mode = ModeHTTP
	}
	rec := x.cc.rec
	rec.d.Host, rec.d.Port = host, port
	if f != nil {
		return f
	}
	c, f := s.open(host, port, rec)
	if f != nil {
		return f
	}
	x.up, x.upRaw, x.upKey = newPeer(&countConn{Conn: c, rec: rec}, 16<<10), c, key
	return nil
}

// hostNames reports whether a Host header names host, and port if it
// carries one.
func hostNames(header, host string, port int) bool {
	h, p, err := net.SplitHostPort(header)
	if err != nil {
		h, p = header, ""
	}
	return normalizeHost(h) == host && (p == "" || p == strconv.Itoa(port))
}

// uriTarget reads an absolute-URI request's target.
func uriTarget(req *http.Request) (string, int, *refusal) {
	if req.URL.Scheme != "http" {
		return "", 0, refuse(ReasonBadRequest, "absolute URI scheme "+strconv.Quote(req.URL.Scheme)+": only http:// (use CONNECT for https)")
	}
	port := 80
	if p := req.URL.Port(); p != "" {
		var err error
		if port, err = parsePort(p); err != nil {
			return "", 0, refuse(ReasonBadRequest, "request URI: "+err.Error())
		}
	}
	return checkTarget(req.URL.Hostname(), port)
}

// prepare readies a client's request for the upstream: hop-by-hop and
// proxy headers go, secrets are injected into header values, and an
// "Expect: 100-continue" is answered by the gateway (reported true) rather
// than forwarded.
func prepare(req *http.Request, bs []Binding) (expectContinue bool) {
	h := req.Header
	for _, k := range []string{"Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate", "Keep-Alive"} {
		delete(h, k)
	}
	var keep []string
	for _, v := range h.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			tok = strings.TrimSpace(tok)
			switch {
			case tok == "", strings.EqualFold(tok, "close"), strings.EqualFold(tok, "keep-alive"):
			case strings.EqualFold(tok, "upgrade"):
				keep = append(keep, tok)
			default:
				h.Del(tok)
			}
		}
	}
	delete(h, "Connection")
	if len(keep) > 0 {
		h["Connection"] = keep
	}
	if strings.EqualFold(h.Get("Expect"), "100-continue") {
		delete(h, "Expect")
		expectContinue = true
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // keeps Request.Write from adding Go's own
	}
	inject(h, bs)
	return expectContinue
}

// writeHead writes a response's status line and header only.
func writeHead(w *bufio.Writer, resp *http.Response) {
	fmt.Fprintf(w, "HTTP/%d.%d %s\r\n", resp.ProtoMajor, resp.ProtoMinor, resp.Status)
	_ = resp.Header.Write(w)
	_, _ = w.WriteString("\r\n")
}

// flushingBody flushes w before each read of the body it wraps: whatever
// was relayed so far is on the wire before the gateway waits for more,
// so streamed responses (server-sent events) and uploads pass through as
// they are produced, while bursts still leave in few writes.
type flushingBody struct {
	io.ReadCloser
	w *bufio.Writer
}

func (b *flushingBody) Read(p []byte) (int, error) {
	if err := b.w.Flush(); err != nil {
		return 0, err
	}
	return b.ReadCloser.Read(p)
}

// bufferedWriter hides bufio.Writer's ReadFrom (which reads into the
// buffer that flushingBody flushes) while keeping WriteByte, so that
// Request.Write adds no buffer of its own.
type bufferedWriter struct{ w *bufio.Writer }

func (b bufferedWriter) Write(p []byte) (int, error)       { return b.w.Write(p) }
func (b bufferedWriter) WriteByte(c byte) error            { return b.w.WriteByte(c) }
func (b bufferedWriter) WriteString(s string) (int, error) { return b.w.WriteString(s) }
