package linuxsandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// mask hides p, a path as the sandbox sees it, under an empty read-only
// tmpfs (a directory) or an empty file. It looks p up inside the
// sandbox's root, not on the host: the init may not be able to search a
// host directory the runner handed it as a mount (a private parent), and
// a mask that looked there would find nothing and hide nothing. A path
// the view does not hold has nothing to hide; one that cannot be looked
// up fails the sandbox's setup.
func mask(root, p string) error {
	target, err := inRoot(root, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mask %s: %w", p, err)
	}
	fi, err := os.Lstat(target)
	if err != nil {
		return fmt.Errorf("mask %s: %w", p, err)
	}
	if fi.IsDir() {
		return unix.Mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0")
	}
	return unix.Mount("/dev/null", target, "", unix.MS_BIND, "")
}

// maxLinks bounds the symbolic links inRoot follows, as the kernel's
// own lookup does (ELOOP).
const maxLinks = 40

// inRoot resolves the absolute path p as a process whose root is root
// would: every symbolic link is followed inside root, an absolute one
// from root itself, and ".." never leaves it. It returns the host path of
// what p names there.
func inRoot(root, p string) (string, error) {
	parts := strings.Split(filepath.Clean("/"+p), "/")
	cur, links := "/", 0
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		if name == "" || name == "." {
			continue
		}
		next := filepath.Join(cur, name) // cur has no links: ".." is lexical
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", &fs.PathError{Op: "lookup", Path: p, Err: unix.ELOOP}
		}
		link, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(link) {
			cur = "/"
		}
		parts = append(strings.Split(link, "/"), parts...)
	}
	return filepath.Join(root, cur), nil
}
