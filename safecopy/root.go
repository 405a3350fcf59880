// Package safecopy reads files out of a directory tree that a job or an
// agent could have written, for the host's own copies of it (snapshot
// restore, job artifacts, task artifact patterns) and for the host's reads
// of a workspace (its snapshot, the overlay layer fill, the read-only
// mount digest). Every path is resolved from an open root directory
// descriptor without following a symlink (openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, or one
// openat(O_NOFOLLOW) per component where openat2 is missing); only
// regular files are opened for reading, with O_NONBLOCK, so a FIFO or a
// device never stalls the host; every copy is capped on the bytes
// actually read, so a sparse file or a file that grows is cut off at the
// cap instead of filling the host's disk; and a file a walk listed is
// read again only if it is the same file (OpenListed).
package safecopy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/safepath"
)

// Errors of this package; they are wrapped with the path they concern.
var (
	// ErrSymlink: a component of the path, or the file itself, is a
	// symlink. Nothing is ever read through one.
	ErrSymlink = errors.New("path goes through a symlink")
	// ErrOutside: the path is absolute or climbs out of the root.
	ErrOutside = errors.New("path leaves its root")
	// ErrNotRegular: the file is a directory, FIFO, socket or device.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file has more bytes than its cap.
	ErrTooLarge = errors.New("file is larger than its cap")
	// ErrBudget: a tree copy has taken all the files its budget allows.
	ErrBudget = errors.New("copy budget exhausted")
	// ErrTooDeep: Walk met a tree deeper than MaxDepth.
	ErrTooDeep = errors.New("directory tree is too deep")
	// ErrChanged: the file opened is not the one a walk listed (another
	// device or inode): it was replaced, or a directory on its path was,
	// since the walk saw it.
	ErrChanged = errors.New("file changed since it was listed")
)

// MaxDepth bounds how deep Walk descends (each level holds a descriptor).
const MaxDepth = 256

// Root is an open directory that paths are resolved beneath. Its methods
// may be called from several goroutines at once.
type Root struct {
	fd   int
	name string
}

// OpenRoot opens dir as a root. dir is the host's own path (a run's
// snapshot directory, a task's inbox): symlinks in its parents are
// followed, but dir itself must not be a symlink, so a job that swaps its
// workspace for a link is refused.
func OpenRoot(dir string) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		var st unix.Stat_t
		if errors.Is(err, unix.ENOTDIR) && unix.Lstat(dir, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = unix.ELOOP // O_DIRECTORY|O_NOFOLLOW says ENOTDIR for a link
		}
		return nil, classify("open", dir, err)
	}
	return &Root{fd: fd, name: dir}, nil
}

// Name returns the directory the root was opened from, for messages.
func (r *Root) Name() string { return r.name }

// Close releases the root's descriptor.
func (r *Root) Close() error { return unix.Close(r.fd) }

// Sub opens the directory rel beneath r as a root of its own.
func (r *Root) Sub(rel string) (*Root, error) {
	clean, err := cleanRel(rel)
	if err != nil {
		return nil, err
	}
	fd, err := OpenBeneath(r.fd, clean, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, classify("open", clean, err)
	}
	return &Root{fd: fd, name: path.Join(r.name, clean)}, nil
}

// Info is what lstat says about one entry.
type Info struct {
	Mode fs.FileMode
	Size int64
	Dev  uint64
	Ino  uint64
	// ModTime is the modification time in nanoseconds since the epoch.
	ModTime int64
	// Rdev is the device number of a device file (0/0 is an overlayfs
	// whiteout).
	Rdev uint64
}

// Stat describes the root directory itself.
func (r *Root) Stat() (Info, error) {
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		return Info{}, classify("fstat", r.name, err)
	}
	return infoOf(&st), nil
}

// Lstat describes rel without following a symlink anywhere on its path.
// rel may be a path as Walk reports it, with any bytes a name can hold
// (see nameRel).
func (r *Root) Lstat(rel string) (Info, error) {
	clean, err := nameRel(rel)
	if err != nil {
		return Info{}, err
	}
	dfd, base, err := r.parent(clean)
	if err != nil {
		return Info{}, err
	}
	defer closeParent(r, dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return Info{}, classify("lstat", clean, err)
	}
	return infoOf(&st), nil
}

// Open opens the regular file rel for reading. Anything else is refused
// without being opened: a symlink (ErrSymlink), a FIFO, socket, device or
// directory (ErrNotRegular). The file is opened with O_NONBLOCK and
// O_NOCTTY and checked again with fstat, so a FIFO swapped in after the
// check cannot block the caller either.
func (r *Root) Open(rel string) (*os.File, Info, error) {
	clean, err := cleanRel(rel)
	if err != nil {
		return nil, Info{}, err
	}
	return r.open(clean)
}

// open is Open for a path already checked.
func (r *Root) open(clean string) (*os.File, Info, error) {
	dfd, base, err := r.parent(clean)
	if err != nil {
		return nil, Info{}, err
	}
	defer closeParent(r, dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, Info{}, classify("lstat", clean, err)
	}
	if err := regular(clean, &st); err != nil {
		return nil, Info{}, err
	}
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, Info{}, classify("open", clean, err)
	}
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		unix.Close(fd)
		return nil, Info{}, classify("fstat", clean, err)
	}
	if err := regular(clean, &now); err != nil {
		unix.Close(fd)
		return nil, Info{}, err
	}
	if now.Dev != st.Dev || now.Ino != st.Ino {
		unix.Close(fd)
		return nil, Info{}, fmt.Errorf("%s: replaced while it was opened: %w", clean, ErrNotRegular)
	}
	return os.NewFile(uintptr(fd), path.Join(r.name, clean)), infoOf(&now), nil
}

// parent opens the directory holding clean (r's own descriptor for a
// top-level name) and returns it with the last component.
func (r *Root) parent(clean string) (int, string, error) {
	if clean == "." {
		return -1, "", fmt.Errorf("%s: the root itself: %w", r.name, ErrNotRegular)
	}
	dir, base := path.Split(clean)
	if dir == "" {
		return r.fd, base, nil
	}
	dfd, err := OpenBeneath(r.fd, path.Clean(dir), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", classify("open", clean, err)
	}
	return dfd, base, nil
}

func closeParent(r *Root, dfd int) {
	if dfd != r.fd {
		unix.Close(dfd)
	}
}

func cleanRel(rel string) (string, error) {
	clean, err := safepath.Clean(rel)
	if err != nil {
		return "", fmt.Errorf("%q: %w: %w", rel, ErrOutside, err)
	}
	return clean, nil
}

func regular(rel string, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFLNK:
		return fmt.Errorf("%s: %w", rel, ErrSymlink)
	}
	return fmt.Errorf("%s: %s: %w", rel, FileMode(st.Mode).Type(), ErrNotRegular)
}

// classify maps the resolution errnos to this package's errors.
func classify(op, p string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%s: %w", p, ErrSymlink)
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%s: %w", p, ErrOutside)
	}
	return &os.PathError{Op: op, Path: p, Err: err}
}

func infoOf(st *unix.Stat_t) Info {
	return Info{Mode: FileMode(st.Mode), Size: st.Size, Dev: st.Dev, Ino: st.Ino, ModTime: st.Mtim.Nano(), Rdev: st.Rdev}
}

// FileMode is the fs.FileMode of a stat(2) mode: its type, permission,
// setuid, setgid and sticky bits.
func FileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
