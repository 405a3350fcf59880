package lifecycle_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestRemoteCloneGoesThroughTheGateway: a task whose repository is a
// remote http(s) URL is cloned through the egress gateway with only the
// repository's host allowed, never over the host's network directly (the
// name does not even resolve here without the gateway's pin). git's own
// smart-HTTP server on loopback stands in for the remote (pinned with
// Resolve, as --egress-resolve does); the clone's connections are
// recorded; a host outside the ceiling is refused before anything runs.
func TestRemoteCloneGoesThroughTheGateway(t *testing.T) {
	origin := tasktest.Origin(t, map[string]string{"a.txt": "remote\n"})
	bare := filepath.Join(filepath.Dir(origin), "repo.git")
	for _, args := range [][]string{{"clone", "--quiet", "--bare", origin, bare}, {"-C", bare, "update-server-info"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git's http-backend is not installed: %v", err)
	}
	// Smart HTTP (the clone is shallow), served by git itself over CGI.
	srv := httptest.NewServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(bare), "GIT_HTTP_EXPORT_ALL=1"}})
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	g, err := egress.New(egress.Config{Resolve: map[string]string{fmt.Sprintf("git.example.com:%d", port): "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	ceiling, _ := egress.ParseRules([]string{fmt.Sprintf("git.example.com:%d", port)})
	cfg := lifecycle.Config{Backend: tasktest.Backend(t), CloneBackoff: &quick, Egress: &egress.Operator{Gateway: g, Ceiling: ceiling}}

	dir, tk, doc := submit(t, `cat a.txt`, "")
	tk.Repository.URL = fmt.Sprintf("http://git.example.com:%d/repo.git", port)
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, cfg)
	if err != nil || md.State != "completed" {
		t.Fatalf("remote task = %s %+v %v", md.State, md.Error, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "outbox", "progress", "stdout.log")); string(b) != "remote\n" {
		t.Errorf("the agent saw %q, want the remote repository's file", b)
	}
	f, err := os.Open(filepath.Join(dir, "outbox", "progress", lifecycle.EgressFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var decisions []egress.Decision
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var d egress.Decision
		json.Unmarshal(sc.Bytes(), &d)
		decisions = append(decisions, d)
	}
	if len(decisions) == 0 || decisions[0].Host != "git.example.com" || !decisions[0].Allowed || decisions[0].Run != tk.Metadata.ID+"/clone" {
		t.Errorf("the clone's egress decisions = %+v, want allowed git.example.com", decisions)
	}

	dir, tk, doc = submit(t, `true`, "")
	tk.Repository.URL = fmt.Sprintf("http://elsewhere.example.com:%d/repo.git", port)
	md, _ = lifecycle.Run(context.Background(), dir, tk, doc, cfg)
	if md.Error == nil || md.Error.Code != job.CodeNetworkDenied {
		t.Errorf("a repository beyond the ceiling = %s %+v, want policy.network_denied", md.State, md.Error)
	}
}
