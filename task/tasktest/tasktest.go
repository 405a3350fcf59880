// Package tasktest builds what agent-task tests share: a local origin
// repository that a sandboxed agent can read (every ancestor directory
// o+x, which linux_sandbox's binds need), and git with a fixed identity.
package tasktest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/backend/localprocess"
)

// Git runs git in dir with a fixed author and fails the test on error; it
// returns the trimmed output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Origin makes <tempdir>/origin, a repository on branch main with files
// (relative path -> content) in one commit, and returns its path; the
// temporary directory beside it is the caller's to use. It skips the test
// when git is missing.
func Origin(t testing.TB, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		os.Chmod(d, 0o755)
	}
	origin := filepath.Join(base, "origin")
	for name, content := range files {
		p := filepath.Join(origin, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, origin, "init", "--quiet", "--initial-branch=main")
	Git(t, origin, "add", ".")
	Git(t, origin, "commit", "--quiet", "-m", "init")
	return origin
}

// Backend is linux_sandbox where it works (CI is root), else
// local_process, said in the test log. The test binary's TestMain must
// call linuxsandbox.MaybeInit.
func Backend(t testing.TB) backend.Backend {
	b, err := linuxsandbox.New(backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Available(context.Background()) == nil {
		return b
	}
	t.Log("linux_sandbox unavailable; tasks run on local_process")
	return localprocess.Backend{}
}
