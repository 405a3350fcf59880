package backend

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/safepath"
)

// WorkspaceDir is SandboxFiles over a workspace the host reaches as the
// directory it names (linux_sandbox's through its init's root,
// local_process's own). Every call opens the directory itself without
// following a symlink and resolves each path from that descriptor with
// safecopy.OpenBeneath, so no symlink at any level is followed and
// nothing outside is reached; what it creates is owned as the directory
// is (the sandbox's workload user, mapped or not).
type WorkspaceDir string

var _ SandboxFiles = WorkspaceDir("")

// Stat implements SandboxFiles.
func (d WorkspaceDir) Stat(ctx context.Context, rel string) (FileInfo, error) {
	clean, err := treePath(rel)
	if err != nil {
		return FileInfo{}, err
	}
	root, err := d.open()
	if err != nil {
		return FileInfo{}, treeError(err, rel)
	}
	defer unix.Close(root)
	if clean == "." {
		var st unix.Stat_t
		if err := unix.Fstat(root, &st); err != nil {
			return FileInfo{}, treeError(err, rel)
		}
		return fileInfo(".", &st), nil
	}
	dfd, base, err := openParent(root, clean)
	if err != nil {
		return FileInfo{}, treeError(err, rel)
	}
	defer closeParent(root, dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return FileInfo{}, treeError(err, rel)
	}
	fi := fileInfo(clean, &st)
	if fi.Type == FileSymlink {
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(dfd, base, buf)
		if err != nil {
			return FileInfo{}, treeError(err, rel)
		}
		fi.SymlinkTarget = string(buf[:n])
	}
	return fi, nil
}

// ReadDir implements SandboxFiles.
func (d WorkspaceDir) ReadDir(ctx context.Context, rel string, limit int) ([]FileInfo, bool, error) {
	clean, err := treePath(rel)
	if err != nil {
		return nil, false, err
	}
	if limit <= 0 {
		limit = DefaultMaxDirEntries
	}
	root, err := d.open()
	if err != nil {
		return nil, false, treeError(err, rel)
	}
	defer unix.Close(root)
	fd, err := openDir(root, clean)
	if err != nil {
		return nil, false, treeError(err, rel)
	}
	dir := os.NewFile(uintptr(fd), clean)
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, false, treeError(err, rel)
	}
	sort.Strings(names)
	truncated := len(names) > limit
	if truncated {
		names = names[:limit]
	}
	out := make([]FileInfo, 0, len(names))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed since it was listed
			}
			return nil, false, treeError(err, rel)
		}
		out = append(out, fileInfo(path.Join(clean, name), &st))
	}
	return out, truncated, nil
}

// openDir opens the directory clean beneath root for reading: a symlink
// there is validation.path_escape, anything else but a directory
// validation.invalid_request.
func openDir(root int, clean string) (int, error) {
	if clean == "." {
		return unix.Openat(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	fd, err := safecopy.OpenBeneath(root, clean, unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOTDIR) {
		var st unix.Stat_t
		if dfd, base, perr := openParent(root, clean); perr == nil {
			serr := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
			closeParent(root, dfd)
			if serr == nil {
				return -1, job.Errorf(job.CodeInvalidRequest, "%s is not a directory", clean).With("path", clean).With("type", string(fileInfo(clean, &st).Type))
			}
		}
	}
	return fd, err
}

// ReadFileRange implements SandboxFiles.
func (d WorkspaceDir) ReadFileRange(ctx context.Context, rel string, w io.Writer, r ByteRange, limit int64) (FileSpan, error) {
	clean, err := treePath(rel)
	if err != nil {
		return FileSpan{}, err
	}
	root, err := safecopy.OpenRoot(string(d))
	if err != nil {
		return FileSpan{}, treeError(err, rel)
	}
	defer root.Close()
	f, info, err := root.Open(clean)
	if err != nil {
		return FileSpan{}, treeError(err, rel)
	}
	defer f.Close()
	off, n, ok := r.Resolve(info.Size)
	span := FileSpan{Offset: off, Size: info.Size}
	if !ok {
		return span, job.Errorf(job.CodeRangeNotSatisfiable, "the range selects no byte of %s (%d bytes)", rel, info.Size).With("path", rel).With("size", info.Size)
	}
	if limit >= 0 && n > limit {
		return span, job.Errorf(job.CodeLimitExceeded, "the range selects %d bytes, more than the %d one read may take", n, limit).With("path", rel).With("max", limit)
	}
	span.Length, err = io.Copy(w, ctxReader{ctx, io.NewSectionReader(f, off, n)})
	return span, treeError(err, rel)
}

// open opens the workspace directory itself, refusing a symlink there
// (ELOOP).
func (d WorkspaceDir) open() (int, error) {
	fd, err := unix.Open(string(d), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	var st unix.Stat_t
	if errors.Is(err, unix.ENOTDIR) && unix.Lstat(string(d), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		err = unix.ELOOP // O_DIRECTORY|O_NOFOLLOW says ENOTDIR for a link
	}
	return fd, err
}

// treePath is rel cleaned ("" is the root), or validation.path_escape.
func treePath(rel string) (string, error) {
	if rel == "" {
		return ".", nil
	}
	clean, err := safepath.Clean(rel)
	if err != nil {
		return "", job.Wrap(job.CodePathEscape, err, "the path must stay inside the workspace").With("path", rel)
	}
	return clean, nil
}

// openParent opens the directory holding clean (not ".") beneath root
// (root itself for a top-level name) and returns it with the last
// component.
func openParent(root int, clean string) (int, string, error) {
	dir, base := path.Split(clean)
	if dir == "" {
		return root, base, nil
	}
	dfd, err := safecopy.OpenBeneath(root, path.Clean(dir), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", err
	}
	return dfd, base, nil
}

func closeParent(root, dfd int) {
	if dfd != root {
		unix.Close(dfd)
	}
}

// fileInfo describes the entry at clean from its lstat.
func fileInfo(clean string, st *unix.Stat_t) FileInfo {
	fi := FileInfo{Name: path.Base(clean), Path: clean, Size: st.Size, ModTime: time.Unix(st.Mtim.Unix()).UTC()}
	fi.Mode = safecopy.FileMode(st.Mode)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		fi.Type = FileRegular
	case unix.S_IFDIR:
		fi.Type = FileDir
	case unix.S_IFLNK:
		fi.Type = FileSymlink
	default:
		fi.Type = FileOther
	}
	return fi
}

// treeError codes a workspace tree call's failure: job errors as they
// are, a missing entry job.not_found, a directory with entries
// session.directory_not_empty, a file that is not regular where one is
// read validation.invalid_request, the rest as fileError does.
func treeError(err error, rel string) error {
	var jerr *job.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &jerr):
		return err
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return job.Wrap(job.CodeJobNotFound, err, "no such file in the workspace").With("path", rel)
	case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
		return job.Wrap(job.CodeDirectoryNotEmpty, err, "the directory is not empty").With("path", rel)
	case errors.Is(err, safecopy.ErrNotRegular):
		return job.Wrap(job.CodeInvalidRequest, err, "not a regular file").With("path", rel)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return job.Wrap(job.CodeRunCanceled, err, "the file call was canceled").With("path", rel)
	}
	return fileError(err, rel)
}
