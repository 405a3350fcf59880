package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/safepath"
)

// errOtherFS: a recursive removal met a directory of another file
// system (a mount in the workspace), which it does not enter.
var errOtherFS = errors.New("a directory on another file system (a mount) is not removed")

// Remove implements SandboxFiles. A recursive removal opens each
// directory from its parent's descriptor with O_NOFOLLOW: a symlink
// inside is unlinked, never entered, and a directory swapped for one
// while the removal runs is unlinked as the link it became.
func (d WorkspaceDir) Remove(ctx context.Context, rel string, recursive bool) error {
	clean, err := treePath(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return job.Errorf(job.CodeInvalidRequest, "the workspace root cannot be removed").With("path", rel)
	}
	root, err := d.open()
	if err != nil {
		return treeError(err, rel)
	}
	defer unix.Close(root)
	var rootSt unix.Stat_t
	if err := unix.Fstat(root, &rootSt); err != nil {
		return treeError(err, rel)
	}
	dfd, base, err := openParent(root, clean)
	if err != nil {
		return treeError(err, rel)
	}
	defer closeParent(root, dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return treeError(err, rel)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return treeError(unix.Unlinkat(dfd, base, 0), rel)
	}
	err = unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR)
	if recursive && (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST)) {
		err = removeTree(ctx, dfd, base, rootSt.Dev, 0)
	}
	return treeError(err, rel)
}

// removeTree removes the directory name of dfd and everything in it,
// staying on file system dev.
func removeTree(ctx context.Context, dfd int, name string, dev uint64, depth int) error {
	if depth >= safecopy.MaxDepth {
		return job.Errorf(job.CodeLimitExceeded, "the directory tree is deeper than %d levels", safecopy.MaxDepth)
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return ignoreMissing(unix.Unlinkat(dfd, name, 0)) // no longer a directory
	case err != nil:
		return err
	}
	dir := os.NewFile(uintptr(fd), name)
	err = func() error {
		defer dir.Close()
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if st.Dev != dev {
			return fmt.Errorf("%s: %w", name, errOtherFS)
		}
		names, err := dir.Readdirnames(-1)
		if err != nil {
			return err
		}
		for _, child := range names {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := unix.Fstatat(fd, child, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return err
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				err = removeTree(ctx, fd, child, dev, depth+1)
			} else {
				err = ignoreMissing(unix.Unlinkat(fd, child, 0))
			}
			if err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		return err
	}
	return ignoreMissing(unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR))
}

func ignoreMissing(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// Rename implements SandboxFiles. Both parents are opened beneath the
// root without following a symlink; to's missing parents are created.
// A file, symlink or empty directory at to is replaced (renameat does
// it atomically where from and to are of one kind; a directory over a
// file, or a file over an empty directory, removes to first).
func (d WorkspaceDir) Rename(ctx context.Context, from, to string) error {
	src, err := treePath(from)
	if err != nil {
		return err
	}
	dst, err := treePath(to)
	if err != nil {
		return err
	}
	if src == "." || dst == "." {
		return job.Errorf(job.CodeInvalidRequest, "the workspace root cannot be moved or replaced").With("from", from).With("to", to)
	}
	if src != dst && safepath.Within(dst, src) {
		return job.Errorf(job.CodeInvalidRequest, "cannot move %s into itself", from).With("from", from).With("to", to)
	}
	root, err := d.open()
	if err != nil {
		return treeError(err, from)
	}
	defer unix.Close(root)
	sdir, sbase, err := openParent(root, src)
	if err != nil {
		return treeError(err, from)
	}
	defer closeParent(root, sdir)
	var st unix.Stat_t
	if err := unix.Fstatat(sdir, sbase, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return treeError(err, from)
	}
	if src == dst {
		return nil
	}
	ddir, dbase := root, path.Base(dst)
	if parent := path.Dir(dst); parent != "." {
		if ddir, err = mkdirAllBeneath(root, parent); err != nil {
			return treeError(err, to)
		}
		defer unix.Close(ddir)
	}
	err = unix.Renameat(sdir, sbase, ddir, dbase)
	switch {
	case errors.Is(err, unix.EISDIR): // a file onto a directory: only an empty one goes
		if err = unix.Unlinkat(ddir, dbase, unix.AT_REMOVEDIR); err == nil {
			err = unix.Renameat(sdir, sbase, ddir, dbase)
		}
	case errors.Is(err, unix.ENOTDIR): // a directory onto a file
		if err = unix.Unlinkat(ddir, dbase, 0); err == nil {
			err = unix.Renameat(sdir, sbase, ddir, dbase)
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EXDEV):
		return job.Wrap(job.CodeRunIOFailed, err, "cannot move across file systems (a mount in the workspace)").With("from", from).With("to", to)
	case errors.Is(err, unix.EINVAL):
		return job.Wrap(job.CodeInvalidRequest, err, "cannot move there").With("from", from).With("to", to)
	}
	return treeError(err, to)
}

// MakeDirs implements SandboxFiles.MakeDirs beneath the workspace
// directory (mkdirAllBeneath, as Rename creates to's parents).
func (d WorkspaceDir) MakeDirs(ctx context.Context, rel string) error {
	clean, err := treePath(rel)
	if err != nil || clean == "." {
		return err
	}
	root, err := d.open()
	if err != nil {
		return treeError(err, rel)
	}
	defer unix.Close(root)
	fd, err := mkdirAllBeneath(root, clean)
	if err != nil {
		return treeError(err, rel)
	}
	return unix.Close(fd)
}

// mkdirAllBeneath creates the directories of rel (clean, relative)
// beneath root that are missing, owned as root is, without following a
// symlink at any level, and returns the last one open.
func mkdirAllBeneath(root int, rel string) (int, error) {
	var owner unix.Stat_t
	if err := unix.Fstat(root, &owner); err != nil {
		return -1, err
	}
	fd, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for _, name := range strings.Split(rel, "/") {
		err := unix.Mkdirat(fd, name, 0o755)
		if err == nil {
			err = unix.Fchownat(fd, name, int(owner.Uid), int(owner.Gid), unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return -1, err
		}
		next, err := safecopy.OpenBeneath(fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}
