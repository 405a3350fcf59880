package linuxsandbox

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestImageUser resolves image users inside a root, never outside it.
func TestImageUser(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0::/root:/bin/sh\napp:x:1001:1002::/app:/bin/sh\nbig:x:70000:70000::/:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc", "group"), []byte("root:x:0:\nstaff:x:50:\n"), 0o644)
	// A root whose passwd is a link out of the image reads nothing.
	escape := t.TempDir()
	os.MkdirAll(filepath.Join(escape, "etc"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(escape, "etc", "passwd"))
	tests := []struct {
		root, user string
		uid, gid   int
		err        bool
	}{
		{root, "", 0, 0, false},
		{root, "root", 0, 0, false},
		{root, "app", 1001, 1002, false},
		{root, "1001", 1001, 1002, false},
		{root, "4242", 4242, 0, false},
		{root, "app:staff", 1001, 50, false},
		{root, "app:7", 1001, 7, false},
		{root, "nobody-here", 0, 0, true},
		{root, "app:nogroup", 0, 0, true},
		{root, "big", 0, 0, true},
		{root, "70000", 0, 0, true},
		{escape, "root", 0, 0, false},
		{escape, "daemon", 0, 0, true}, // the host's passwd has daemon; the link resolves inside
	}
	for _, tt := range tests {
		fd, err := unix.Open(tt.root, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		uid, gid, err := imageUser(fd, tt.user)
		unix.Close(fd)
		if (err != nil) != tt.err || err == nil && (uid != tt.uid || gid != tt.gid) {
			t.Errorf("imageUser(%q) = %d, %d, %v; want %d, %d, error %v", tt.user, uid, gid, err, tt.uid, tt.gid, tt.err)
		}
	}
}
