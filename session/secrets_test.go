package session_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/secretfile"
	"github.com/agent-runner/agent-runner/session"
)

const secretValue = "sk-session-secret-5d1e"

// secretsFile writes a secrets file registering API_KEY (a file, bound
// to host) and LOOSE (bound to no host).
func secretsFile(t *testing.T, host string) *secretfile.File {
	t.Helper()
	dir := t.TempDir()
	val := filepath.Join(dir, "api-key")
	if err := os.WriteFile(val, []byte(secretValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf("secrets:\n  API_KEY: {file: %s, hosts: [%q]}\n  LOOSE: {file: %s}\n", val, host, val)
	f, err := secretfile.Parse([]byte(src), filepath.Join(dir, "secrets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSecretsAtTheGateway: on linux_sandbox a sandbox's secret is a
// placeholder in its processes' environment, and the egress gateway puts
// the real value in the request header to the secret's host; the value
// is never in the sandbox's record or output.
func TestSecretsAtTheGateway(t *testing.T) {
	seen := make(chan string, 4)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		io.WriteString(w, "upstream-ok")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	host := fmt.Sprintf("api.example.com:%d", port)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	g, err := egress.New(egress.Config{Resolve: map[string]string{host: "127.0.0.1"}, UpstreamRoots: roots})
	if err != nil {
		t.Fatal(err)
	}
	ceiling, _ := egress.ParseRules([]string{host})
	f := newFixture(t, "linux_sandbox", func(cfg *session.Config) {
		cfg.Egress = &egress.Operator{Gateway: g, Ceiling: ceiling}
		cfg.Secrets = secretsFile(t, host)
	})
	network := &session.Network{Mode: job.NetworkAllowlist, AllowedHosts: []string{host}}
	rec := f.create(t, session.CreateRequest{Network: network, Secrets: []string{"API_KEY"}})
	res := f.exec(t, rec.ID, "sh", "-c", `curl -sS --max-time 30 -H "Authorization: Bearer $API_KEY" https://`+host+`/; echo; echo "$API_KEY"`)
	if res.Status != job.StatusCompleted || !strings.HasPrefix(res.Stdout, "upstream-ok\nagent-runner-placeholder-API_KEY-") {
		t.Fatalf("exec = %s %q %q; want the upstream's answer, then the placeholder", res.Status, res.Stdout, res.Stderr)
	}
	if got := <-seen; got != "Bearer "+secretValue {
		t.Errorf("the upstream saw Authorization %q, want the real value", got)
	}
	got, err := f.s.Get(rec.ID)
	if err != nil || len(got.Secrets) != 1 || got.Secrets[0] != "API_KEY" {
		t.Errorf("record secrets = %v, %v; want [API_KEY]", got.Secrets, err)
	}
	b, _ := os.ReadFile(filepath.Join(f.cfg.Records.Path(rec.ID), "session.json"))
	if strings.Contains(string(b)+res.Stdout+res.Stderr, secretValue) {
		t.Error("the secret's value is in the sandbox's record or output")
	}
}

// TestSecretsRefused: a secret needs the secrets file, network
// allowlist, a registration and hosts; each refusal leaves nothing.
func TestSecretsRefused(t *testing.T) {
	g, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ceiling, _ := egress.ParseRules([]string{"api.example.com"})
	allow := &session.Network{Mode: job.NetworkAllowlist, AllowedHosts: []string{"api.example.com"}}
	none := newFixture(t, "local_process", func(cfg *session.Config) { cfg.Egress = &egress.Operator{Gateway: g, Ceiling: ceiling} })
	_, _, err = none.s.Create(context.Background(), session.CreateRequest{Network: allow, Secrets: []string{"API_KEY"}})
	wantCode(t, "a secret without a secrets file", err, job.CodeForbidden)

	f := newFixture(t, "local_process", func(cfg *session.Config) {
		cfg.Egress = &egress.Operator{Gateway: g, Ceiling: ceiling}
		cfg.Secrets = secretsFile(t, "api.example.com")
	})
	for _, c := range []struct {
		what string
		req  session.CreateRequest
		code job.Code
	}{
		{"network disabled", session.CreateRequest{Secrets: []string{"API_KEY"}}, job.CodeInvalidRequest},
		{"not registered", session.CreateRequest{Network: allow, Secrets: []string{"OTHER"}}, job.CodeForbidden},
		{"bound to no host", session.CreateRequest{Network: allow, Secrets: []string{"LOOSE"}}, job.CodeForbidden},
		{"named twice", session.CreateRequest{Network: allow, Secrets: []string{"API_KEY", "API_KEY"}}, job.CodeInvalidRequest},
		{"also in env", session.CreateRequest{Network: allow, Secrets: []string{"API_KEY"}, Env: map[string]string{"API_KEY": "x"}}, job.CodeInvalidRequest},
		{"beyond the policy's allowed_env", session.CreateRequest{Network: allow, Secrets: []string{"API_KEY"}, Policy: &job.Policy{AllowShell: true}}, job.CodeEnvDenied},
	} {
		c.req.ID = "refused"
		_, _, err := f.s.Create(context.Background(), c.req)
		wantCode(t, c.what, err, c.code)
	}
	if _, err := f.s.Get("refused"); job.CodeOf(err) != job.CodeJobNotFound {
		t.Errorf("a refused create left a record: %v", err)
	}
}
