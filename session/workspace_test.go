package session_test

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
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// gitRepo makes a repository under root with two commits of note.txt
// ("one", then "two") on branch main, and returns its path and the
// first commit.
func gitRepo(t *testing.T, root string) (string, string) {
	t.Helper()
	dir := filepath.Join(root, "repo")
	run := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run("init", "--quiet", "--initial-branch", "main")
	for _, content := range []string{"one", "two"} {
		if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		run("add", "note.txt")
		run("commit", "--quiet", "-m", content)
	}
	return dir, run("rev-parse", "HEAD~1")
}

// TestWorkspaceRepository: a local repository under the roots is cloned
// as the sandbox's workspace (its branch's head, or the commit asked);
// a remote one beyond the egress ceiling or not over HTTP, one outside
// the roots, a path beside it and a malformed commit are refused before
// anything is made.
func TestWorkspaceRepository(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			root := t.TempDir()
			repo, first := gitRepo(t, root)
			roots, err := workspaceroot.New([]string{root})
			if err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, kind, func(cfg *session.Config) { cfg.Roots = roots })
			head := f.create(t, session.CreateRequest{Workspace: &session.Workspace{Repository: repo, Branch: "main"}})
			if res := f.exec(t, head.ID, "cat", "note.txt"); res.Stdout != "two\n" {
				t.Errorf("the branch's head: cat note.txt = %q %+v, want \"two\\n\"", res.Stdout, res.Error)
			}
			if head.Workspace.Repository != repo || head.Workspace.Branch != "main" {
				t.Errorf("record workspace = %+v", head.Workspace)
			}
			pinned := f.create(t, session.CreateRequest{Workspace: &session.Workspace{Repository: "file://" + repo, Commit: first}})
			if res := f.exec(t, pinned.ID, "cat", "note.txt"); res.Stdout != "one\n" {
				t.Errorf("the pinned commit: cat note.txt = %q %+v, want \"one\\n\"", res.Stdout, res.Error)
			}
			for _, c := range []struct {
				what string
				ws   session.Workspace
				code job.Code
			}{
				{"remote beyond the egress ceiling", session.Workspace{Repository: "https://example.com/r.git"}, job.CodeNetworkDenied},
				{"remote over ssh", session.Workspace{Repository: "ssh://example.com/r.git"}, job.CodeNetworkDenied},
				{"outside the roots", session.Workspace{Repository: t.TempDir()}, job.CodePathEscape},
				{"path and repository", session.Workspace{Repository: repo, Path: repo}, job.CodeInvalidRequest},
				{"a malformed commit", session.Workspace{Repository: repo, Commit: "--exec=x"}, job.CodeInvalidRequest},
				{"an option as branch", session.Workspace{Repository: repo, Branch: "--upload-pack=x"}, job.CodeInvalidRequest},
				{"a branch without repository", session.Workspace{Branch: "main"}, job.CodeInvalidRequest},
			} {
				_, _, err := f.s.Create(context.Background(), session.CreateRequest{ID: "refused", Workspace: &c.ws})
				wantCode(t, c.what, err, c.code)
			}
			if _, err := f.s.Get("refused"); job.CodeOf(err) != job.CodeJobNotFound {
				t.Errorf("a refused create left a record: %v", err)
			}
		})
	}
}

// TestWorkspaceRemoteRepository: a remote repository is cloned through
// the egress gateway with only its host allowed (git's own smart-HTTP
// server on loopback stands in for it, its name pinned as
// --egress-resolve does), the clone's connections recorded in the
// sandbox's egress file; one beyond the ceiling is refused.
func TestWorkspaceRemoteRepository(t *testing.T) {
	httpBackend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(httpBackend); err != nil {
		t.Skipf("git's http-backend is not installed: %v", err)
	}
	root := t.TempDir()
	repo, _ := gitRepo(t, root)
	bare := filepath.Join(root, "repo.git")
	if out, err := exec.Command("git", "clone", "--quiet", "--bare", repo, bare).CombinedOutput(); err != nil {
		t.Fatalf("git clone --bare: %v %s", err, out)
	}
	srv := httptest.NewServer(&cgi.Handler{Path: httpBackend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	defer srv.Close()
	host := fmt.Sprintf("git.example.com:%d", srv.Listener.Addr().(*net.TCPAddr).Port)
	g, err := egress.New(egress.Config{Resolve: map[string]string{host: "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	ceiling, _ := egress.ParseRules([]string{host})
	f := newFixture(t, "local_process", func(cfg *session.Config) { cfg.Egress = &egress.Operator{Gateway: g, Ceiling: ceiling} })
	rec := f.create(t, session.CreateRequest{Workspace: &session.Workspace{Repository: "http://" + host + "/repo.git", Branch: "main"}})
	if res := f.exec(t, rec.ID, "cat", "note.txt"); res.Stdout != "two\n" {
		t.Errorf("cat note.txt = %q %+v, want the remote's \"two\\n\"", res.Stdout, res.Error)
	}
	b, err := os.ReadFile(filepath.Join(f.cfg.Records.Path(rec.ID), session.EgressFile))
	if err != nil {
		t.Fatal(err)
	}
	var first egress.Decision
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &first) != nil || first.Host != "git.example.com" || !first.Allowed || first.Run != rec.ID+"/clone" {
		t.Errorf("the clone's egress decisions = %s, want git.example.com allowed for run %s/clone", b, rec.ID)
	}
	other := fmt.Sprintf("http://elsewhere.example.com:%d/repo.git", srv.Listener.Addr().(*net.TCPAddr).Port)
	_, _, err = f.s.Create(context.Background(), session.CreateRequest{Workspace: &session.Workspace{Repository: other}})
	wantCode(t, "a repository beyond the ceiling", err, job.CodeNetworkDenied)
}
