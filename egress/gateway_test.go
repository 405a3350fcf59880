package egress

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func okHandler(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
}

func TestTunnelAllowed(t *testing.T) {
	pki := newTestPKI(t)
	port := pki.tlsUpstream(t, okHandler("hello over tls"))
	h := startGateway(t, pinnedConfig(pki), []string{hostPort("api.example.test", port)}, nil)
	client, tr := h.client(t, pki.roots)

	for i := range 2 { // two requests on one kept-alive tunnel
		resp, err := client.Get(fmt.Sprintf("https://api.example.test:%d/", port))
		if err != nil {
			t.Fatalf("request %d through the tunnel: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got, want := string(body), "hello over tls"; got != want {
			t.Errorf("body = %q, want %q", got, want)
		}
	}
	tr.CloseIdleConnections()
	d := h.next(t)
	if d.Mode != ModeTunnel || !d.Allowed || d.Rule != hostPort("api.example.test", port) || d.Host != "api.example.test" || d.Port != port {
		t.Errorf("decision = %+v, want an allowed tunnel to api.example.test:%d by its rule", d, port)
	}
	if got, want := d.Addr, hostPort("127.0.0.1", port); got != want {
		t.Errorf("decision addr = %q, want %q (the pinned address)", got, want)
	}
	if d.BytesUp == 0 || d.BytesDown == 0 || d.Run != "run-1" || d.Duration <= 0 {
		t.Errorf("decision = %+v, want bytes both ways, the run id and a duration", d)
	}
}

func TestAbsoluteURIKeepAlive(t *testing.T) {
	pki := newTestPKI(t)
	port := plainUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s path=%s", r.Host, r.URL.RequestURI())
	}))
	h := startGateway(t, pinnedConfig(pki), []string{hostPort("plain.example.test", port)}, nil)
	client, tr := h.client(t, nil)

	for _, path := range []string{"/a?x=1", "/b"} {
		resp, err := client.Get(fmt.Sprintf("http://plain.example.test:%d%s", port, path))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got, want := string(body), fmt.Sprintf("host=plain.example.test:%d path=%s", port, path); got != want {
			t.Errorf("upstream saw %q, want %q", got, want)
		}
	}
	tr.CloseIdleConnections()
	d := h.next(t)
	if d.Mode != ModeHTTP || !d.Allowed || d.BytesUp == 0 || d.BytesDown == 0 {
		t.Errorf("decision = %+v, want one allowed http decision for the kept-alive connection", d)
	}
	select {
	case extra := <-h.audit:
		t.Errorf("a second decision %+v for one kept-alive connection", extra)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestRefusedRequests(t *testing.T) {
	pki := newTestPKI(t)
	tlsPort := pki.tlsUpstream(t, okHandler("ok"))
	plainPort := plainUpstream(t, okHandler("ok"))
	h := startGateway(t, pinnedConfig(pki), []string{
		hostPort("api.example.test", tlsPort), hostPort("plain.example.test", plainPort), hostPort("localhost", tlsPort),
	}, nil)

	plain := hostPort("plain.example.test", plainPort)
	for _, tc := range []struct {
		name, request string
		status        int
		body, rule    string
	}{
		{"not listed", "CONNECT api.evil.test:443 HTTP/1.1\r\nHost: api.evil.test:443\r\n\r\n",
			403, "agent-runner egress: api.evil.test:443 refused (not_allowed: not in this run's allowlist)\n", ReasonNotAllowed},
		{"listed host, other port", fmt.Sprintf("CONNECT api.example.test:%d HTTP/1.1\r\n\r\n", tlsPort+1),
			403, "not_allowed", ReasonNotAllowed},
		{"IPv4 literal", fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", tlsPort), 403, "(ip_literal:", ReasonIPLiteral},
		{"IPv6 literal", "CONNECT [::1]:443 HTTP/1.1\r\n\r\n", 403, "(ip_literal:", ReasonIPLiteral},
		{"inet_aton spelling", "CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", 403, "(ip_literal:", ReasonIPLiteral},
		{"absolute URI to an IP", fmt.Sprintf("GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", plainPort, plainPort), 403, "(ip_literal:", ReasonIPLiteral},
		{"absolute URI not listed", "GET http://api.evil.test/ HTTP/1.1\r\nHost: api.evil.test\r\n\r\n", 403, "api.evil.test:80 refused (not_allowed", ReasonNotAllowed},
		{"absolute URI, Host header differs", "GET http://" + plain + "/ HTTP/1.1\r\nHost: evil.example.test\r\n\r\n", 403, "(host_mismatch:", ReasonHostMismatch},
		{"https absolute URI", "GET https://api.example.test/ HTTP/1.1\r\nHost: api.example.test\r\n\r\n", 400, "(bad_request:", ReasonBadRequest},
		{"origin-form request", "GET / HTTP/1.1\r\nHost: plain.example.test\r\n\r\n", 400, "request refused (bad_request: not a proxy request)", ReasonBadRequest},
		{"not HTTP", "HELLO\r\n\r\n", 400, "(bad_request:", ReasonBadRequest},
		{"listed name resolving to loopback, not pinned", fmt.Sprintf("CONNECT localhost:%d HTTP/1.1\r\n\r\n", tlsPort),
			403, fmt.Sprintf("localhost:%d refused (internal_address: resolves to an internal address)", tlsPort), ReasonInternalAddress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.raw(t, tc.request)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.body) {
				t.Errorf("answer = %d %q, want %d containing %q", resp.StatusCode, body, tc.status, tc.body)
			}
			if d := h.next(t); d.Allowed || d.Rule != tc.rule {
				t.Errorf("decision = %+v, want refused with %s", d, tc.rule)
			}
		})
	}
}

func TestTunnelFirstBytes(t *testing.T) {
	pki := newTestPKI(t)
	tlsPort := pki.tlsUpstream(t, okHandler("ok"))
	plainPort := plainUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain "+r.Host) }))
	h := startGateway(t, pinnedConfig(pki), []string{
		hostPort("api.example.test", tlsPort), hostPort("other.example.test", tlsPort), hostPort("plain.example.test", plainPort),
	}, nil)
	api, plain := hostPort("api.example.test", tlsPort), hostPort("plain.example.test", plainPort)

	t.Run("SNI names another allowed host", func(t *testing.T) {
		c, _, resp := h.connect(t, api)
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT = %d, want 200", resp.StatusCode)
		}
		err := tls.Client(c, &tls.Config{ServerName: "other.example.test", RootCAs: pki.roots}).Handshake()
		if err == nil {
			t.Error("handshake with a mismatched SNI succeeded")
		}
		if d := h.next(t); d.Allowed || d.Rule != ReasonSNIMismatch || !strings.Contains(d.Error, "other.example.test") {
			t.Errorf("decision = %+v, want sni_mismatch naming other.example.test", d)
		}
	})
	t.Run("no SNI", func(t *testing.T) {
		c, _, _ := h.connect(t, api)
		if err := tls.Client(c, &tls.Config{InsecureSkipVerify: true}).Handshake(); err == nil {
			t.Error("handshake without SNI succeeded")
		}
		if d := h.next(t); d.Allowed || d.Rule != ReasonSNIMismatch {
			t.Errorf("decision = %+v, want sni_mismatch", d)
		}
	})
	t.Run("plain HTTP with a matching Host", func(t *testing.T) {
		c, br, _ := h.connect(t, plain)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+plain+"\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if got, want := string(body), "plain "+plain; got != want {
			t.Errorf("body = %q, want %q", got, want)
		}
		if d := h.next(t); !d.Allowed || d.Mode != ModeHTTP {
			t.Errorf("decision = %+v, want allowed, mode http", d)
		}
	})
	t.Run("plain HTTP with another Host", func(t *testing.T) {
		c, br, _ := h.connect(t, plain)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: evil.example.test\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 403 || !strings.Contains(string(body), "host_mismatch") {
			t.Errorf("answer = %d %q, want 403 host_mismatch", resp.StatusCode, body)
		}
		if d := h.next(t); d.Allowed || d.Rule != ReasonHostMismatch {
			t.Errorf("decision = %+v, want host_mismatch", d)
		}
	})
	t.Run("neither TLS nor HTTP", func(t *testing.T) {
		c, br, _ := h.connect(t, api)
		c.Write([]byte{0, 1, 2, 3})
		if _, err := br.ReadByte(); err == nil {
			t.Error("the tunnel answered bytes that are neither TLS nor HTTP")
		}
		if d := h.next(t); d.Allowed || d.Rule != ReasonNotTLSOrHTTP {
			t.Errorf("decision = %+v, want not_tls_or_http", d)
		}
	})
}

func TestPinnedInternalAddressAllowed(t *testing.T) {
	pki := newTestPKI(t)
	port := pki.tlsUpstream(t, okHandler("pinned"))
	cfg := Config{Resolve: map[string]string{"localhost:" + fmt.Sprint(port): "127.0.0.1"}}
	h := startGateway(t, cfg, []string{hostPort("localhost", port)}, nil)
	client, tr := h.client(t, pki.roots)
	resp, err := client.Get(fmt.Sprintf("https://localhost:%d/", port))
	if err != nil {
		t.Fatalf("pinned loopback name: %v", err)
	}
	resp.Body.Close()
	tr.CloseIdleConnections()
	if d := h.next(t); !d.Allowed || d.Addr != hostPort("127.0.0.1", port) {
		t.Errorf("decision = %+v, want allowed at the pinned address", d)
	}
}

func TestHeaderTimeout(t *testing.T) {
	pki := newTestPKI(t)
	cfg := pinnedConfig(pki)
	cfg.HeaderTimeout = 100 * time.Millisecond
	h := startGateway(t, cfg, nil, nil)
	c, br := h.dial(t)
	io.WriteString(c, "CONNECT api.exa") // never finished
	start := time.Now()
	if _, err := br.ReadByte(); err == nil {
		t.Error("a silent client got an answer")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the gateway held a silent client %v, want about the 100ms header timeout", took)
	}
	if d := h.next(t); d.Allowed || d.Rule != ReasonBadRequest {
		t.Errorf("decision = %+v, want bad_request", d)
	}
}

func TestConnectionCap(t *testing.T) {
	pki := newTestPKI(t)
	port := pki.tlsUpstream(t, okHandler("ok"))
	cfg := pinnedConfig(pki)
	cfg.MaxConns = 1
	h := startGateway(t, cfg, []string{hostPort("api.example.test", port)}, nil)
	if _, _, resp := h.connect(t, hostPort("api.example.test", port)); resp.StatusCode != 200 {
		t.Fatalf("first CONNECT = %d, want 200", resp.StatusCode)
	}
	resp, body := h.raw(t, "CONNECT api.example.test:443 HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 503 || !strings.Contains(body, "too_many_connections") {
		t.Errorf("second connection = %d %q, want 503 too_many_connections", resp.StatusCode, body)
	}
	if d := h.next(t); d.Rule != ReasonTooMany {
		t.Errorf("decision = %+v, want too_many_connections", d)
	}
}

func TestServeEndsConnections(t *testing.T) {
	pki := newTestPKI(t)
	port := pki.tlsUpstream(t, okHandler("ok"))
	h := startGateway(t, pinnedConfig(pki), []string{hostPort("api.example.test", port)}, nil)
	c, br, resp := h.connect(t, hostPort("api.example.test", port))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT = %d", resp.StatusCode)
	}
	h.cancel()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup's check
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return with a tunnel open")
	}
	if _, err := br.ReadByte(); err == nil {
		t.Error("the open tunnel survived Serve")
	}
	c.Close()
	if d := h.next(t); d.Mode != ModeTunnel {
		t.Errorf("decision = %+v, want the open tunnel's record", d)
	}
}

func TestServeArguments(t *testing.T) {
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	binding := Binding{Name: "K", Placeholder: Placeholder("K"), Value: "v-secret-value", Hosts: []Rule{{Host: "a.test"}}}
	for _, tc := range []struct {
		name string
		run  *Run
	}{
		{"no run", nil},
		{"no id", &Run{}},
		{"bindings without a CA", &Run{ID: "r", Bindings: []Binding{binding}}},
		{"empty value", &Run{ID: "r", Bindings: []Binding{{Name: "K", Placeholder: Placeholder("K"), Hosts: binding.Hosts}}}},
	} {
		err := g.Serve(t.Context(), nil, tc.run, nil)
		if err == nil {
			t.Errorf("%s: Serve = nil, want an error", tc.name)
		} else if strings.Contains(err.Error(), "v-secret-value") {
			t.Errorf("%s: error %q holds the secret value", tc.name, err)
		}
	}
}

// flakyListener fails its first Accept with a temporary error.
type flakyListener struct {
	net.Listener
	failed bool
}

type temporaryError struct{}

func (temporaryError) Error() string   { return "too many open files" }
func (temporaryError) Temporary() bool { return true }
func (temporaryError) Timeout() bool   { return false }

func (l *flakyListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, temporaryError{}
	}
	return l.Listener.Accept()
}

func TestServeRetriesTemporaryAcceptErrors(t *testing.T) {
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	audit := make(chan Decision, 1)
	done := make(chan error, 1)
	go func() {
		done <- g.Serve(t.Context(), &flakyListener{Listener: ln}, &Run{ID: "r", Audit: func(d Decision) { audit <- d }}, nil)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "CONNECT api.evil.test:443 HTTP/1.1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	c.Close()
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("answer after a temporary accept error = %v, %v, want 403", resp, err)
	}
	<-audit
	ln.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve after its listener closed = %v, want nil", err)
	}
}
