package rootfs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/safecopy"
)

// forceWalk makes Open use the openat walk even where openat2 exists
// (tests run both).
var forceWalk bool

// Open opens loc beneath its root. flags are open(2) flags (O_RDONLY,
// O_DIRECTORY, ...); O_NOFOLLOW, O_CLOEXEC and O_NONBLOCK are always added,
// so a FIFO cannot block the caller. Resolution is safecopy's: openat2
// with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or a no-follow walk.
func Open(loc Location, flags int) (*os.File, error) {
	rfd, err := unix.Open(loc.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open root", Path: loc.Root, Err: err}
	}
	defer unix.Close(rfd)
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	open := safecopy.OpenBeneath
	if forceWalk {
		open = safecopy.WalkBeneath
	}
	fd, err := open(rfd, loc.Rel, flags)
	if err != nil {
		return nil, classify(loc, err)
	}
	return os.NewFile(uintptr(fd), loc.Abs()), nil
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
