package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/procself"
)

// DiskImage is the file backing a task's size-limited workspace.
func (l Layout) DiskImage() string { return filepath.Join(l.Dir, "disk.img") }

// MountQuota makes inbox/ an ext4 filesystem of size bytes, backed by a
// sparse disk.img in the task directory and loop-mounted nosuid,nodev, so
// vm.disk is enforced: a write past it fails with ENOSPC. It needs root
// and mkfs.ext4; the error says why when it cannot (the caller records the
// limit as not enforced). The mount lives as long as the workspace (see
// RemoveWorkspace, Remount).
func MountQuota(ctx context.Context, l Layout, size int64) error {
	if os.Geteuid() != 0 {
		return errors.New("a disk quota needs root (loop mount)")
	}
	if size < 16<<20 {
		return fmt.Errorf("vm.disk %d bytes is below the 16 MiB a workspace filesystem needs", size)
	}
	if err := os.MkdirAll(l.Inbox(), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(l.DiskImage(), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Truncate(size), f.Close()); err != nil {
		return err
	}
	// On the failures below, a disk.img left behind goes with the
	// workspace (RemoveWorkspace); the caller records why vm.disk is not
	// enforced.
	mkfs := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1", l.DiskImage())
	if out, err := mkfs.CombinedOutput(); err != nil {
		os.Remove(l.DiskImage())
		return fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := mount(ctx, l); err != nil {
		os.Remove(l.DiskImage())
		return err
	}
	// An empty directory for git clone.
	return os.Remove(filepath.Join(l.Inbox(), "lost+found"))
}

func mount(ctx context.Context, l Layout) error {
	out, err := exec.CommandContext(ctx, "mount", "-o", "loop,nosuid,nodev", l.DiskImage(), l.Inbox()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("loop mount: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Mounted reports whether inbox/ is a mount point.
func Mounted(l Layout) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	want := filepath.Clean(l.Inbox())
	if abs, err := filepath.Abs(want); err == nil {
		want = abs
	}
	// A mount table that cannot be read to its end is searched as far as
	// it was read.
	mounts, _ := procself.Mounts(f)
	for _, m := range mounts {
		if m.Point == want {
			return true
		}
	}
	return false
}

// Remount mounts an existing disk.img again (after a host reboot) when
// the workspace has one and is not mounted.
func Remount(ctx context.Context, l Layout) error {
	if _, err := os.Stat(l.DiskImage()); err != nil || Mounted(l) {
		return nil
	}
	return mount(ctx, l)
}

// RemoveWorkspace unmounts and removes the workspace: inbox/, its disk
// image, base.git and the task's home. Each is tried; the error joins
// every one that could not be removed.
func RemoveWorkspace(l Layout) error {
	if Mounted(l) {
		if err := unix.Unmount(l.Inbox(), 0); err != nil {
			// Busy (a process still has files open): detach it, the
			// kernel frees it when the last user goes.
			if err := unix.Unmount(l.Inbox(), unix.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount the workspace: %w", err)
			}
		}
	}
	errs := []error{os.RemoveAll(l.Inbox()), os.RemoveAll(l.Base()), os.RemoveAll(l.Home())}
	if err := os.Remove(l.DiskImage()); !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
