package taskstore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/task/lifecycle"
)

// TestTaskRecordsArePrivate: the task store was 0755 with 0644 files, so
// any local user listed task ids and read manifests (prompts), states and
// logs. Directories let others pass through (a sandbox's uid reaches its
// workspace below) but not list; files are the runner's alone.
func TestTaskRecordsArePrivate(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tasks")
	s, err := New(root, lifecycle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	q := &countingQueue{}
	s.Queue = q
	id, err := s.Submit([]byte("version: \"1\"\nkind: Task\nmetadata: {id: private, name: n}\nrepository: {url: /nowhere, branch: main}\nclaude: {prompt: a secret plan}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root, s.Dir(id)} {
		fi, _ := os.Stat(dir)
		if got := fi.Mode().Perm(); got&0o066 != 0 {
			t.Errorf("%s mode = %v, want no group or other read or write", dir, got)
		}
	}
	err = filepath.Walk(s.Dir(id), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode = %v, want 0600", p, fi.Mode().Perm())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
