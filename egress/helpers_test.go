package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// testPKI is the stand-in for the public web PKI: a root and one leaf for
// every test upstream name.
type testPKI struct {
	roots   *x509.CertPool
	rootPEM []byte
	leaf    tls.Certificate
}

var testNames = []string{"api.example.test", "other.example.test", "sse.example.test", "localhost"}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	root := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egress test root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	rootDER, err := x509.CreateCertificate(rand.Reader, root, root, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	rootCert, _ := x509.ParseCertificate(rootDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "egress test upstream"}, DNSNames: testNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, rootCert, &leafKey.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{roots: x509.NewCertPool(), rootPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rootDER})}
	p.roots.AddCert(rootCert)
	p.leaf = tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
	return p
}

// tlsUpstream starts an HTTPS server on loopback with the test leaf.
func (p *testPKI) tlsUpstream(t *testing.T, h http.Handler) (port int) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.leaf}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// plainUpstream starts an HTTP server on loopback.
func plainUpstream(t *testing.T, h http.Handler) (port int) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// syncBuffer is a log sink safe for the gateway's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// harness is a gateway serving one run on a loopback TCP listener.
type harness struct {
	addr  string
	ca    *CA
	reg   *prometheus.Registry
	logs  *syncBuffer
	audit chan Decision

	mu  sync.Mutex
	all []Decision

	cancel context.CancelFunc
	done   chan error
}

// pinnedConfig pins every test name to loopback and trusts the test root
// for intercepted upstreams.
func pinnedConfig(p *testPKI) Config {
	return Config{
		Resolve:       map[string]string{"api.example.test": "127.0.0.1", "other.example.test": "127.0.0.1", "sse.example.test": "127.0.0.1", "plain.example.test": "127.0.0.1"},
		UpstreamRoots: p.roots,
	}
}

func startGateway(t *testing.T, cfg Config, rules []string, bindings []Binding) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry(), logs: &syncBuffer{}, audit: make(chan Decision, 100), done: make(chan error, 1)}
	cfg.Metrics = h.reg
	cfg.Logger = slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	if len(bindings) > 0 {
		if h.ca, err = NewCA(); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	run := &Run{ID: "run-1", Rules: rs, Bindings: bindings, Audit: func(d Decision) {
		h.mu.Lock()
		h.all = append(h.all, d)
		h.mu.Unlock()
		h.audit <- d
	}}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- g.Serve(ctx, ln, run, h.ca) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("Serve = %v, want nil after cancel", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return within 5s of cancel")
		}
	})
	return h
}

// next waits for the next audit record.
func (h *harness) next(t *testing.T) Decision {
	t.Helper()
	select {
	case d := <-h.audit:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no audit record within 5s")
		return Decision{}
	}
}

// client is an HTTP client that uses the gateway as its proxy and trusts
// roots.
func (h *harness) client(t *testing.T, roots *x509.CertPool) (*http.Client, *http.Transport) {
	t.Helper()
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: h.addr}),
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, tr
}

// runCAPool is a pool holding the run CA only.
func (h *harness) runCAPool(t *testing.T) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(h.ca.CertPEM()) {
		t.Fatal("run CA PEM does not parse")
	}
	return pool
}

// dial opens a raw connection to the gateway.
func (h *harness) dial(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

// connect opens a raw CONNECT tunnel and returns the gateway's answer.
func (h *harness) connect(t *testing.T, target string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, br := h.dial(t)
	if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return c, br, resp
}

// raw sends a raw request and reads the answer and its body.
func (h *harness) raw(t *testing.T, request string) (*http.Response, string) {
	t.Helper()
	c, br := h.dial(t)
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading answer to %q: %v", request, err)
	}
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	return resp, string(body)
}

// hostPort is name:port.
func hostPort(name string, port int) string { return net.JoinHostPort(name, strconv.Itoa(port)) }
