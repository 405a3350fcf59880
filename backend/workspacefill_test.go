package backend_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// TestMoveIntoWorkspace: a staged tree moves into a workspace owned by
// the workspace's owner, links moved as links (their targets untouched),
// a name the workspace already holds refused and kept, and a workspace
// that is a link refused.
func TestMoveIntoWorkspace(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("giving files to another owner needs root")
	}
	const owner = 4242
	base := t.TempDir()
	staged, ws, outside := filepath.Join(base, "staged"), filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{staged, filepath.Join(staged, "src", "deep"), ws, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chown(ws, owner, owner)
	os.WriteFile(filepath.Join(staged, "README"), []byte("staged\n"), 0o644)
	os.WriteFile(filepath.Join(staged, "src", "deep", "f.go"), []byte("package f\n"), 0o600)
	os.WriteFile(filepath.Join(outside, "host"), []byte("host\n"), 0o644)
	os.Symlink(filepath.Join(outside, "host"), filepath.Join(staged, "link"))
	if err := backend.MoveIntoWorkspace(staged, ws); err != nil {
		t.Fatalf("MoveIntoWorkspace = %v", err)
	}
	for _, rel := range []string{"README", "src", "src/deep", "src/deep/f.go", "link"} {
		fi, err := os.Lstat(filepath.Join(ws, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != owner || st.Gid != owner {
			t.Errorf("%s owned by %d:%d, want %d:%d", rel, st.Uid, st.Gid, owner, owner)
		}
	}
	if fi, err := os.Lstat(filepath.Join(ws, "link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link: %v %v, want a symlink", fi.Mode(), err)
	}
	if fi, _ := os.Stat(filepath.Join(outside, "host")); fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("the link's target was given away: owner %d", fi.Sys().(*syscall.Stat_t).Uid)
	}
	if ents, _ := os.ReadDir(staged); len(ents) != 0 {
		t.Errorf("staged still holds %d entries, want none", len(ents))
	}

	// A name the workspace holds is never replaced.
	os.WriteFile(filepath.Join(staged, "README"), []byte("second\n"), 0o644)
	err := backend.MoveIntoWorkspace(staged, ws)
	if job.CodeOf(err) != job.CodeRunIOFailed {
		t.Errorf("a second README: %v, want %s", err, job.CodeRunIOFailed)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "README")); string(b) != "staged\n" {
		t.Errorf("README = %q, want the first one kept", b)
	}

	// A workspace that is a link is not followed.
	link := filepath.Join(base, "wslink")
	os.Symlink(outside, link)
	os.Remove(filepath.Join(staged, "README"))
	os.WriteFile(filepath.Join(staged, "x"), nil, 0o644)
	if err := backend.MoveIntoWorkspace(staged, link); job.CodeOf(err) != job.CodePathEscape {
		t.Errorf("into a linked workspace: %v, want %s", err, job.CodePathEscape)
	}
	if _, err := os.Lstat(filepath.Join(outside, "x")); err == nil {
		t.Errorf("x landed through the link")
	}
}
