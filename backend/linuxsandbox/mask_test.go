package linuxsandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInRoot: a masked path is looked up as the sandbox sees it, links
// followed inside the root and never out of it.
func TestInRoot(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"etc/ssl", "usr/lib", "opt/tools"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "etc/ssl/key"), nil, 0o644)
	os.WriteFile(filepath.Join(root, "usr/lib/secret"), nil, 0o644)
	os.Symlink("usr/lib", filepath.Join(root, "lib"))                 // relative
	os.Symlink("/etc/ssl", filepath.Join(root, "opt/tools/ssl"))      // absolute: the root's /etc/ssl
	os.Symlink("../../../../../etc", filepath.Join(root, "opt/up"))   // climbs past the root
	os.Symlink("loop", filepath.Join(root, "loop"))                   // itself
	os.Symlink("/nowhere", filepath.Join(root, "opt/tools/dangling")) // nothing there
	tests := []struct {
		p, want string
		err     error
	}{
		{"/etc/ssl/key", "etc/ssl/key", nil},
		{"/lib/secret", "usr/lib/secret", nil},
		{"/opt/tools/ssl/key", "etc/ssl/key", nil},
		{"/opt/up/ssl/key", "etc/ssl/key", nil},
		{"/opt/tools/../../etc/ssl", "etc/ssl", nil},
		{"/missing/file", "", fs.ErrNotExist},
		{"/opt/tools/dangling", "", fs.ErrNotExist},
		{"/loop", "", unix.ELOOP},
		{"/etc/ssl/key/below", "", unix.ENOTDIR},
	}
	for _, tt := range tests {
		got, err := inRoot(root, tt.p)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("inRoot(%q) = %q, %v, want %v", tt.p, got, err, tt.err)
			}
			continue
		}
		if want := filepath.Join(root, tt.want); err != nil || got != want {
			t.Errorf("inRoot(%q) = %q, %v, want %q", tt.p, got, err, want)
		}
	}
}
