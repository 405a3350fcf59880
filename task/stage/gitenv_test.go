package stage

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestGitEnvironmentIsClean: the runner's environment does not reach host
// git (GIT_DIR here would redirect the repository; credential helpers or
// proxies of the operator's shell the same way).
func TestGitEnvironmentIsClean(t *testing.T) {
	elsewhere := filepath.Join(t.TempDir(), "elsewhere.git")
	t.Setenv("GIT_DIR", elsewhere)
	dir := t.TempDir()
	if _, err := git(context.Background(), dir, "init", "-q"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		t.Errorf("git init did not create %s/.git: %v", dir, err)
	}
	if _, err := os.Stat(elsewhere); err == nil {
		t.Errorf("git followed the runner's GIT_DIR to %s", elsewhere)
	}
}
