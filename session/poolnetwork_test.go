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

// TestPoolAllowlist: an allowlist template's pooled sandboxes are
// bridged to the gateway before any claim, but each claim's own
// allowed_hosts are what its connections are held to: one claim reaches
// the host it asked for, another claim that asked for another host is
// refused it; each one's decisions are in its own record.
func TestPoolAllowlist(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "through the gateway\n") }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	a, b := fmt.Sprintf("a.example:%d", port), fmt.Sprintf("b.example:%d", port)
	g, err := egress.New(egress.Config{Resolve: map[string]string{a: "127.0.0.1", b: "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	ceiling, _ := egress.ParseRules([]string{a, b})
	f, _ := poolFixture(t, "linux_sandbox", 2, func(c *session.Config) {
		c.Egress = &egress.Operator{Gateway: g, Ceiling: ceiling}
		c.Templates["t"] = session.Template{Pool: 2, Network: &session.Network{Mode: job.NetworkAllowlist, AllowedHosts: []string{a}}}
	})
	ra := f.create(t, session.CreateRequest{Template: "t"})
	rb := f.create(t, session.CreateRequest{Template: "t", Network: &session.Network{Mode: job.NetworkAllowlist, AllowedHosts: []string{b}}})
	if ra.Start != session.StartWarm || rb.Start != session.StartWarm {
		t.Fatalf("starts %q %q (%s), want both warm", ra.Start, rb.Start, rb.StartReason)
	}
	curl := func(id, host string) session.ExecResult {
		return f.exec(t, id, "curl", "-sS", "--max-time", "30", "http://"+host+"/")
	}
	if res := curl(ra.ID, a); res.Status != job.StatusCompleted || res.Stdout != "through the gateway\n" {
		t.Errorf("claim a to its host = %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	// The gateway answers a refused host itself.
	refused := func(res session.ExecResult) bool {
		return strings.Contains(res.Stdout, "refused") && !strings.Contains(res.Stdout, "through the gateway")
	}
	if res := curl(ra.ID, b); !refused(res) {
		t.Errorf("claim a to b's host = %s %q, want refused", res.Status, res.Stdout)
	}
	if res := curl(rb.ID, b); res.Status != job.StatusCompleted || res.Stdout != "through the gateway\n" {
		t.Errorf("claim b to its host = %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	if res := curl(rb.ID, a); !refused(res) {
		t.Errorf("claim b to a's host (the template's) = %s %q, want refused", res.Status, res.Stdout)
	}
	for _, id := range []string{ra.ID, rb.ID} {
		if _, err := f.s.Delete(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	la, _ := os.ReadFile(filepath.Join(f.cfg.Records.Path(ra.ID), session.EgressFile))
	lb, _ := os.ReadFile(filepath.Join(f.cfg.Records.Path(rb.ID), session.EgressFile))
	if !strings.Contains(string(la), `"run":"`+ra.ID+`"`) || strings.Contains(string(la), rb.ID) {
		t.Errorf("a's egress log = %q, want its own decisions only", la)
	}
	if !strings.Contains(string(lb), `"run":"`+rb.ID+`"`) || strings.Contains(string(lb), ra.ID) {
		t.Errorf("b's egress log = %q, want its own decisions only", lb)
	}
}
