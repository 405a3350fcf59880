package linuxsandbox_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/job"
)

// TestEgressBridge: with network allowlist the workload's proxy variables
// lead to the run's gateway socket on the host (here a stand-in that
// answers every absolute-URI request), and to nothing else.
func TestEgressBridge(t *testing.T) {
	b := sandbox(t)
	dir, err := os.MkdirTemp("", "ar-egress-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o711)
	sock := filepath.Join(dir, "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(sock, 0o666)
	var mu sync.Mutex
	var seen []string
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				mu.Lock()
				seen = append(seen, req.Method+" "+req.URL.String())
				mu.Unlock()
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nfrom-gateway"))
			}()
		}
	}()
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644)
	program := `
import os, urllib.request, socket
print("proxy", os.environ.get("HTTPS_PROXY"), os.environ.get("http_proxy"), os.environ.get("SSL_CERT_FILE"))
print("body", urllib.request.urlopen("http://example.test/path", timeout=5).read().decode())
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    print("DIRECT-REACHED")
except OSError as e:
    print("direct blocked", type(e).__name__)
print("ca", open(os.environ["SSL_CERT_FILE"]).read().strip())
`
	out, errs, o := backendtest.Attack(t, b, program, func(s *backend.Spec) {
		s.Network = job.NetworkAllowlist
		s.Egress = &backend.Egress{Socket: sock, CABundle: ca}
		s.Env = append(s.Env, "HTTPS_PROXY=http://evil.example:1")
	})
	if o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("sandbox: %+v\n%s%s", o, out, errs)
	}
	for _, want := range []string{
		"proxy http://127.0.0.1:3128 http://127.0.0.1:3128 /.agent-runner/ca.pem",
		"body from-gateway", "direct blocked", "ca -----BEGIN CERTIFICATE-----",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sandbox output lacks %q:\n%s%s", want, out, errs)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "GET http://example.test/path" {
		t.Errorf("the gateway saw %q, want the one proxied request", seen)
	}
}

// Without an egress bridge, allowlist is a setup error, not an open
// network.
func TestAllowlistWithoutGatewayIsRefused(t *testing.T) {
	b := sandbox(t)
	spec, _, _ := backendtest.Spec(t, "/bin/true")
	spec.Network = job.NetworkAllowlist
	if _, err := b.Run(context.Background(), spec); job.CodeOf(err) != job.CodeBackendSetupFailed {
		t.Errorf("allowlist without Egress = %v, want %s", err, job.CodeBackendSetupFailed)
	}
}
