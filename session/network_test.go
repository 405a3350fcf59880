package session_test

import (
	"context"
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
	"github.com/agent-runner/agent-runner/session"
)

// TestAllowlistThroughTheGateway: on linux_sandbox, a sandbox with
// network allowlist reaches its allowed host through the operator's
// egress gateway, and only it, at every exec; the gateway's decisions
// are kept in its record; hosts beyond the ceiling are refused at
// create.
func TestAllowlistThroughTheGateway(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "through the gateway\n") }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	allowed := fmt.Sprintf("allowed.example:%d", port)
	g, err := egress.New(egress.Config{Resolve: map[string]string{allowed: "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	ceiling, _ := egress.ParseRules([]string{allowed})
	f := newFixture(t, "linux_sandbox", func(cfg *session.Config) { cfg.Egress = &egress.Operator{Gateway: g, Ceiling: ceiling} })
	_, _, err = f.s.Create(context.Background(), session.CreateRequest{Network: &session.Network{Mode: job.NetworkAllowlist, AllowedHosts: []string{"other.example"}}})
	wantCode(t, "a host beyond the ceiling", err, job.CodeNetworkDenied)
	id := f.create(t, session.CreateRequest{Network: &session.Network{Mode: job.NetworkAllowlist, AllowedHosts: []string{allowed}}}).ID
	for range 2 {
		res := f.exec(t, id, "curl", "-sS", "--max-time", "30", "http://"+allowed+"/")
		if res.Status != job.StatusCompleted || res.Stdout != "through the gateway\n" {
			t.Fatalf("curl the allowed host = %s %q %q", res.Status, res.Stdout, res.Stderr)
		}
	}
	other := fmt.Sprintf("http://127.0.0.1:%d/", port)
	if res := f.exec(t, id, "curl", "-sS", "--max-time", "30", "--noproxy", "*", other); res.Status == job.StatusCompleted {
		t.Errorf("curl around the gateway = %s %q; want it failed (no network but the gateway)", res.Status, res.Stdout)
	}
	if _, err := f.s.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(f.cfg.Records.Path(id), session.EgressFile))
	if err != nil || !strings.Contains(string(b), "allowed.example") {
		t.Errorf("egress decisions = %q, %v; want the allowed host's", b, err)
	}
}
