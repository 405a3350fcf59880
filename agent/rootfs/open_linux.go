package rootfs

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// forceWalk makes Open use the openat walk even where openat2 exists
// (tests run both).
var forceWalk bool

// Open opens loc beneath its root. flags are open(2) flags (O_RDONLY,
// O_DIRECTORY, ...); O_NOFOLLOW, O_CLOEXEC and O_NONBLOCK are always added,
// so a FIFO cannot block the caller.
func Open(loc Location, flags int) (*os.File, error) {
	rfd, err := unix.Open(loc.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open root", Path: loc.Root, Err: err}
	}
	defer unix.Close(rfd)
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	var fd int
	if forceWalk {
		fd, err = walk(rfd, loc.Rel, flags)
	} else {
		fd, err = unix.Openat2(rfd, loc.Rel, &unix.OpenHow{
			Flags:   uint64(flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if errors.Is(err, unix.ENOSYS) || (errors.Is(err, unix.EPERM) && openat2Blocked()) {
			fd, err = walk(rfd, loc.Rel, flags)
		}
	}
	if err != nil {
		return nil, classify(loc, err)
	}
	return os.NewFile(uintptr(fd), loc.Abs()), nil
}

// openat2Blocked reports whether a seccomp filter answers openat2 with
// EPERM (some container runtimes do); then the walk is used.
func openat2Blocked() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
	if err == nil {
		unix.Close(fd)
		return false
	}
	return true
}

// walk opens rel one component at a time with O_NOFOLLOW. rel comes from
// Locate, so it is clean and has no "..".
func walk(rfd int, rel string, flags int) (int, error) {
	if rel == "." {
		return unix.Openat(rfd, ".", flags, 0)
	}
	parts := strings.Split(rel, "/")
	dfd := rfd
	defer func() {
		if dfd != rfd {
			unix.Close(dfd)
		}
	}()
	for _, part := range parts[:len(parts)-1] {
		if part == ".." || part == "" {
			return -1, unix.EXDEV
		}
		next, err := unix.Openat(dfd, part, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return -1, err
		}
		if dfd != rfd {
			unix.Close(dfd)
		}
		dfd = next
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFLNK:
			return -1, unix.ELOOP
		default:
			return -1, unix.ENOTDIR
		}
	}
	last := parts[len(parts)-1]
	if last == ".." {
		return -1, unix.EXDEV
	}
	return unix.Openat(dfd, last, flags, 0)
}

func classify(loc Location, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%s: %w", loc.Abs(), ErrSymlink)
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%s: %w", loc.Abs(), ErrOutside)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%s: %w", loc.Abs(), ErrNotDir)
	}
	return &os.PathError{Op: "open", Path: loc.Abs(), Err: err}
}
