package workspaceroot

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

func TestCheck(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	root := filepath.Join(base, "root")
	store := filepath.Join(root, "store")
	for _, d := range []string{filepath.Join(root, "ws", "sub"), filepath.Join(store, "runs", "job_1"), filepath.Join(base, "outside")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("/etc", filepath.Join(root, "etc-link"))
	os.Symlink(filepath.Join(root, "ws"), filepath.Join(root, "ws-link"))
	os.Symlink(root, filepath.Join(base, "root-link"))
	r, err := New([]string{filepath.Join(base, "root-link")}, store)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want string
		code job.Code
	}{
		{filepath.Join(root, "ws"), filepath.Join(root, "ws"), ""},
		{filepath.Join(root, "ws", "sub"), filepath.Join(root, "ws", "sub"), ""},
		{filepath.Join(root, "ws-link"), filepath.Join(root, "ws"), ""},
		{filepath.Join(base, "root-link", "ws"), filepath.Join(root, "ws"), ""},
		{"/etc", "", job.CodePathEscape},
		{filepath.Join(base, "outside"), "", job.CodePathEscape},
		{filepath.Join(root, "etc-link"), "", job.CodePathEscape},
		{filepath.Join(root, "ws", "..", "..", "outside"), "", job.CodePathEscape},
		{filepath.Join(root, "ws") + "/../ws", "", job.CodePathEscape},
		{store, "", job.CodePathEscape},
		{filepath.Join(store, "runs", "job_1"), "", job.CodePathEscape},
		{root, "", job.CodePathEscape}, // holds the store
		{filepath.Join(root, "missing"), "", job.CodeInvalidRequest},
		{"/etc/missing", "", job.CodePathEscape},
		{"", "", job.CodePathEscape},
		{root + "/ws\x00", "", job.CodePathEscape},
	}
	for _, tt := range tests {
		got, err := r.Check(tt.path)
		if got != tt.want || job.CodeOf(err) != tt.code {
			t.Errorf("Check(%q) = %q, %v; want %q, code %q", tt.path, got, err, tt.want, tt.code)
		}
	}
}

func TestZeroRootsRefuseEverything(t *testing.T) {
	if got, err := (Roots{}).Check(t.TempDir()); job.CodeOf(err) != job.CodePathEscape {
		t.Errorf("Roots{}.Check = %q, %v; want %s", got, err, job.CodePathEscape)
	}
}

func TestNewDefaultsToTheWorkingDirectory(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if len(r.Dirs) != 1 || r.Dirs[0] != wd {
		t.Errorf("New(nil).Dirs = %q, want [%q]", r.Dirs, wd)
	}
	if _, err := New([]string{"/does/not/exist"}); err == nil {
		t.Error("New with a missing root succeeded")
	}
}
