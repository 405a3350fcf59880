package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
)

// restoreWithin runs Restore and fails the test if it has not returned
// after 10 s (the old Restore blocked forever opening a FIFO).
func restoreWithin(t *testing.T, src, dst string, m Manifest) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- Restore(context.Background(), src, dst, m) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Restore still blocked after 10 s")
		return nil
	}
}

// storedSnapshot copies a small tree and returns the snapshot dir and its
// manifest.
func storedSnapshot(t *testing.T) (string, Manifest) {
	t.Helper()
	src := tree(t, map[string]string{"a.txt": "alpha", "d/b.txt": "beta"})
	snap := filepath.Join(t.TempDir(), "snap")
	m, err := Copy(context.Background(), src, snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return snap, m
}

// TestRestoreRefusesSpecialFiles: a job replaces a file of its own
// snapshot with a FIFO, a /dev/zero twin or a socket; Restore ends with
// run.snapshot_failed at once instead of blocking or reading forever.
func TestRestoreRefusesSpecialFiles(t *testing.T) {
	tests := []struct {
		name string
		make func(p string) error
	}{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"char device 1:5", func(p string) error { return syscall.Mknod(p, syscall.S_IFCHR|0o644, 1<<8|5) }},
		{"socket", func(p string) error { return syscall.Mknod(p, syscall.S_IFSOCK|0o644, 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, m := storedSnapshot(t)
			p := filepath.Join(snap, "d", "b.txt")
			os.Remove(p)
			if err := tt.make(p); errors.Is(err, syscall.EPERM) {
				t.Skipf("cannot make a %s here: %v", tt.name, err)
			} else if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			err := restoreWithin(t, snap, out, m)
			if got, want := job.CodeOf(err), job.CodeSnapshotFailed; got != want || !errors.Is(err, safecopy.ErrNotRegular) {
				t.Errorf("Restore over a %s = %v (code %q), want %q wrapping ErrNotRegular", tt.name, err, got, want)
			}
			if _, err := os.Lstat(filepath.Join(out, "d", "b.txt")); err == nil {
				t.Errorf("Restore left d/b.txt behind")
			}
		})
	}
}

// TestRestoreRefusesIntermediateSymlink: the job turns its snapshot's
// "a" into a link to /etc and the manifest lists "a/passwd" with the
// host file's own hash; the old Restore followed the link and copied
// /etc/passwd. Nothing outside the snapshot may be read.
func TestRestoreRefusesIntermediateSymlink(t *testing.T) {
	host, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Skipf("no /etc/passwd: %v", err)
	}
	sum := sha256.Sum256(host)
	snap := t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(snap, "a")); err != nil {
		t.Fatal(err)
	}
	m := Manifest{Files: 1, Bytes: int64(len(host)), Entries: []Record{
		{Path: "a/passwd", Type: "file", Mode: "0644", SHA256: hex.EncodeToString(sum[:])},
	}}
	out := filepath.Join(t.TempDir(), "out")
	err = restoreWithin(t, snap, out, m)
	if !errors.Is(err, safecopy.ErrSymlink) {
		t.Errorf("Restore through a -> /etc = %v, want ErrSymlink", err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "a", "passwd")); err == nil {
		t.Errorf("Restore copied %d bytes of the host's /etc/passwd", len(b))
	}
}

// TestRestoreCapsOnRecordedBytes: the job swaps a 5-byte file for a
// sparse 8 GiB one; the old Restore copied all 8 GiB before comparing
// hashes. Restore refuses it without writing more than the manifest's
// byte total.
func TestRestoreCapsOnRecordedBytes(t *testing.T) {
	snap, m := storedSnapshot(t)
	if err := os.Truncate(filepath.Join(snap, "a.txt"), 8<<30); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	err := restoreWithin(t, snap, out, m)
	if !errors.Is(err, safecopy.ErrTooLarge) {
		t.Errorf("Restore of a sparse 8 GiB file = %v, want ErrTooLarge", err)
	}
	if fi, err := os.Stat(filepath.Join(out, "a.txt")); err == nil {
		t.Errorf("Restore left a.txt of %d bytes", fi.Size())
	}
}

// TestCopyFileRefusesAFIFO: a workspace file swapped for a FIFO between
// Copy's walk and its copy is refused at once (the old open blocked until
// a writer came).
func TestCopyFileRefusesAFIFO(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := safecopy.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	info, err := root.Lstat("f")
	if err != nil {
		t.Fatal(err)
	}
	e := Entry{Rel: "f", Mode: info.Mode, Size: info.Size, Dev: info.Dev, Ino: info.Ino}
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(f, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	done := make(chan error, 1)
	go func() {
		_, err := copyFiles(context.Background(), root, out, []Entry{e}, make([]string, 1), safecopy.NoLimit)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("copy of a file swapped for a FIFO succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("copy still blocked on a FIFO after 10 s")
	}
	if _, err := os.Lstat(filepath.Join(out, "f")); err == nil {
		t.Error("the refused copy left a file in the snapshot")
	}
}
