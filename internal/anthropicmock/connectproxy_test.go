package anthropicmock

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// connectProxy is the smallest HTTPS proxy that does what the egress
// gateway will: it accepts CONNECT for the hosts in routes and dials the
// address routed to instead; every other CONNECT, and every plain HTTP
// request, is refused with 403. It records every target asked for.
type connectProxy struct {
	ln     net.Listener
	routes map[string]string // host:port asked for -> address dialled
	wg     sync.WaitGroup

	mu      sync.Mutex
	targets []string // "CONNECT host:port" or "GET http://..." in order
	conns   []net.Conn
}

func startConnectProxy(t *testing.T, routes map[string]string) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{ln: ln, routes: routes}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *connectProxy) url() string { return "http://" + p.ln.Addr().String() }

// asked returns the targets clients asked for.
func (p *connectProxy) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

func (p *connectProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *connectProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *connectProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *connectProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.targets = append(p.targets, req.Method+" "+req.RequestURI)
	p.mu.Unlock()
	to, ok := p.routes[req.Host]
	if req.Method != http.MethodConnect || !ok {
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", to)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return
	}
	p.track(up)
	defer up.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(up, br) // br holds whatever the client sent after the CONNECT
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, up)
	c.(*net.TCPConn).CloseWrite()
	<-done
}
