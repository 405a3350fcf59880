package safecopy

import (
	"errors"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// forceWalk makes openBeneath use the per-component walk even where
// openat2 works (tests run both).
var forceWalk bool

// OpenBeneath opens the clean relative path rel beneath dirfd with flags
// (O_CLOEXEC is added), never following a symlink in any component, the
// last included: ELOOP when one is met, EXDEV for "..". It uses openat2
// where it works and WalkBeneath elsewhere. agent/rootfs shares it.
func OpenBeneath(dirfd int, rel string, flags int) (int, error) {
	if !forceWalk && haveOpenat2() {
		// RESOLVE_NO_SYMLINKS covers the last component too, with ELOOP;
		// O_NOFOLLOW is left out because with O_DIRECTORY it would turn
		// that into ENOTDIR.
		how := &unix.OpenHow{
			Flags:   uint64(flags | unix.O_CLOEXEC),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		fd, err := unix.Openat2(dirfd, rel, how)
		for errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			fd, err = unix.Openat2(dirfd, rel, how)
		}
		return fd, err
	}
	return WalkBeneath(dirfd, rel, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC)
}

var (
	openat2Once sync.Once
	openat2OK   bool
)

// haveOpenat2 reports whether openat2 works here: it is missing before
// Linux 5.6, and some seccomp profiles answer it with EPERM or ENOSYS.
func haveOpenat2() bool {
	openat2Once.Do(func() {
		fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
		if err == nil {
			unix.Close(fd)
			openat2OK = true
		}
	})
	return openat2OK
}

// WalkBeneath opens rel one component at a time, for kernels without
// openat2: every directory with O_PATH|O_NOFOLLOW and checked with fstat,
// the last with flags (which must carry O_NOFOLLOW). rel is clean, so it
// has no "..".
func WalkBeneath(dirfd int, rel string, flags int) (int, error) {
	if rel == "." {
		return unix.Openat(dirfd, ".", flags, 0)
	}
	parts := strings.Split(rel, "/")
	dfd := dirfd
	defer func() {
		if dfd != dirfd {
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
		if dfd != dirfd {
			unix.Close(dfd)
		}
		dfd = next
		var st unix.Stat_t
		if err := unix.Fstat(dfd, &st); err != nil {
			return -1, err
		}
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
	fd, err := unix.Openat(dfd, last, flags, 0)
	if errors.Is(err, unix.ENOTDIR) && flags&unix.O_DIRECTORY != 0 {
		// O_DIRECTORY|O_NOFOLLOW answers ENOTDIR for a symlink: say so.
		var st unix.Stat_t
		if unix.Fstatat(dfd, last, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return -1, unix.ELOOP
		}
	}
	return fd, err
}
