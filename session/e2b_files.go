package session

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
)

// The smallest file-tree calls the E2B-compatible door needs beside
// ReadFile and WriteFile (stat, list, make a directory, move, remove),
// until the session service's own (issue 23) replace them. Like ReadFile
// and WriteFile they work on the host side of the workspace, relative to
// it, with fd-relative calls that never follow a symlink at any level:
// a symlink is reported, moved or removed as itself.

// MaxListEntries bounds one ListEntries.
const MaxListEntries = 10000

// Entry is a file, directory or symlink of a sandbox's workspace.
type Entry struct {
	// Path is relative to the workspace.
	Path string
	// Type is "file", "dir", "symlink" or "other" (a FIFO, a socket).
	Type    string
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
	UID     uint32
	GID     uint32
	// Target is a symlink's target.
	Target string
}

// StatEntry is the entry rel of running or paused sandbox id's
// workspace: job.not_found when there is none.
func (s *Service) StatEntry(ctx context.Context, id, rel string) (Entry, error) {
	var e Entry
	err := s.atParent(id, rel, false, func(h *handle, dfd int, name, clean string) error {
		var err error
		e, err = statAt(dfd, name, clean)
		return err
	})
	return e, err
}

// ListEntries lists directory rel of running or paused sandbox id's
// workspace to depth levels (1: its own entries), directories before
// what they hold; symlinks are listed, not followed. More than
// MaxListEntries is validation.limit_exceeded.
func (s *Service) ListEntries(ctx context.Context, id, rel string, depth int) ([]Entry, error) {
	if depth < 1 {
		return nil, job.Errorf(job.CodeInvalidRequest, "depth must be at least 1").With("field", "depth")
	}
	var out []Entry
	err := s.atParent(id, rel, false, func(h *handle, dfd int, name, clean string) error {
		fd, err := openDirAt(dfd, name)
		if errors.Is(err, unix.ENOTDIR) {
			if e, _ := statAt(dfd, name, clean); e.Type == "symlink" {
				return unix.ELOOP
			}
			return job.Errorf(job.CodeInvalidRequest, "%s is not a directory", rel).With("path", rel)
		}
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return listAt(fd, clean, depth, &out)
	})
	return out, err
}

// MakeDirEntry creates directory rel of running sandbox id's workspace
// and its missing parents; created is false when rel already exists.
func (s *Service) MakeDirEntry(ctx context.Context, id, rel string) (Entry, bool, error) {
	clean, err := workspacePath(rel)
	if err != nil {
		return Entry{}, false, err
	}
	if e, err := s.StatEntry(ctx, id, clean); err == nil {
		return e, false, nil
	}
	h, err := s.running(id, StateRunning)
	if err != nil {
		return Entry{}, false, err
	}
	err = mkdirBeneath(h.sb.Workspace(), clean)
	h.mu.Unlock()
	if err != nil {
		return Entry{}, false, fileError(err, rel, s.cfg.MaxFileBytes)
	}
	e, err := s.StatEntry(ctx, id, clean)
	return e, err == nil, err
}

// MoveEntry renames from to to in running sandbox id's workspace
// (replacing a file there; to's missing parents are created) and
// answers the entry at to.
func (s *Service) MoveEntry(ctx context.Context, id, from, to string) (Entry, error) {
	dst, err := workspacePath(to)
	if err != nil {
		return Entry{}, err
	}
	err = s.atParent(id, from, true, func(h *handle, sfd int, sname, _ string) error {
		if dir := path.Dir(dst); dir != "." {
			if err := mkdirBeneath(h.sb.Workspace(), dir); err != nil {
				return err
			}
		}
		return s.atParentLocked(h, dst, func(_ *handle, dfd int, dname, _ string) error {
			return unix.Renameat(sfd, sname, dfd, dname)
		})
	})
	if err != nil {
		return Entry{}, err
	}
	return s.StatEntry(ctx, id, dst)
}

// RemoveEntry removes rel of running sandbox id's workspace: a file or
// symlink, or a directory with everything under it.
func (s *Service) RemoveEntry(ctx context.Context, id, rel string) error {
	return s.atParent(id, rel, true, func(_ *handle, dfd int, name, _ string) error {
		return removeAllAt(dfd, name)
	})
}

// atParent calls fn with sandbox id's handle (locked), rel's parent
// directory open beneath its workspace, rel's last name and rel cleaned
// (the workspace itself is "." in "."): the sandbox running or paused,
// or running only when write.
func (s *Service) atParent(id, rel string, write bool, fn func(h *handle, dfd int, name, clean string) error) error {
	clean, err := workspacePath(rel)
	if err != nil {
		return err
	}
	if write && clean == "." {
		return job.Errorf(job.CodePathEscape, "the workspace root cannot be moved or removed").With("path", rel)
	}
	ok := []State{StateRunning, StatePaused}
	if write {
		ok = ok[:1]
	}
	h, err := s.running(id, ok...)
	if err != nil {
		return err
	}
	defer h.mu.Unlock()
	return fileError(s.atParentLocked(h, clean, fn), rel, s.cfg.MaxFileBytes)
}

// atParentLocked is atParent's work on h (locked), rel clean.
func (s *Service) atParentLocked(h *handle, rel string, fn func(h *handle, dfd int, name, clean string) error) error {
	root, err := unix.Open(h.sb.Workspace(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	if rel == "." {
		return fn(h, root, ".", ".")
	}
	dfd, err := safecopy.OpenBeneath(root, path.Dir(rel), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return fn(h, dfd, path.Base(rel), rel)
}

// statAt is the entry name in dfd, not followed.
func statAt(dfd int, name, rel string) (Entry, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return Entry{}, err
	}
	e := Entry{Path: rel, Size: st.Size, Mode: fs.FileMode(st.Mode & 0o7777), ModTime: time.Unix(st.Mtim.Unix()), UID: st.Uid, GID: st.Gid}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Type = "file"
	case unix.S_IFDIR:
		e.Type, e.Mode = "dir", e.Mode|fs.ModeDir
	case unix.S_IFLNK:
		e.Type, e.Mode = "symlink", e.Mode|fs.ModeSymlink
		buf := make([]byte, unix.PathMax)
		if n, err := unix.Readlinkat(dfd, name, buf); err == nil {
			e.Target = string(buf[:n])
		}
	default:
		e.Type = "other"
	}
	return e, nil
}

// openDirAt opens directory name in dfd without following a symlink.
func openDirAt(dfd int, name string) (int, error) {
	return unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// namesAt are the names in directory fd (which it leaves open).
func namesAt(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}

// listAt appends the entries of directory fd (at rel) to out, descending
// depth-1 more levels into directories.
func listAt(fd int, rel string, depth int, out *[]Entry) error {
	names, err := namesAt(fd)
	if err != nil {
		return err
	}
	for _, name := range names {
		if len(*out) >= MaxListEntries {
			return job.Errorf(job.CodeLimitExceeded, "the listing holds more than %d entries", MaxListEntries).With("max", MaxListEntries)
		}
		e, err := statAt(fd, name, path.Join(rel, name))
		if errors.Is(err, unix.ENOENT) {
			continue // removed since it was read
		}
		if err != nil {
			return err
		}
		*out = append(*out, e)
		if e.Type == "dir" && depth > 1 {
			sub, err := openDirAt(fd, name)
			if err != nil {
				return err
			}
			err = listAt(sub, e.Path, depth-1, out)
			unix.Close(sub)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// removeAllAt removes name in dfd: a directory with what it holds,
// anything else as itself.
func removeAllAt(dfd int, name string) error {
	err := unix.Unlinkat(dfd, name, 0)
	if err == nil || !errors.Is(err, unix.EISDIR) {
		return err
	}
	fd, err := openDirAt(dfd, name)
	if err != nil {
		return err
	}
	names, err := namesAt(fd)
	for _, n := range names {
		if err == nil {
			err = removeAllAt(fd, n)
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
}
