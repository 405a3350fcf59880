package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/safepath"
)

// ReadWorkspaceFile is Sandbox.ReadFile for a backend whose workspace the
// host reaches at dir: package safecopy's fd-relative, no-follow,
// regular-file-only, capped read. A path that leaves dir or goes through
// a symlink is validation.path_escape; any other failure run.io_failed
// (wrapping the cause, so os.ErrNotExist and safecopy's errors match).
func ReadWorkspaceFile(ctx context.Context, dir, rel string, w io.Writer, limit int64) error {
	root, err := safecopy.OpenRoot(dir)
	if err != nil {
		return fileError(err, rel)
	}
	defer root.Close()
	if limit < 0 {
		limit = safecopy.NoLimit
	}
	_, err = root.Copy(ctx, rel, w, limit)
	return fileError(err, rel)
}

// WriteWorkspaceFile is Sandbox.WriteFile for a backend whose workspace
// the host reaches at dir. The parent of rel is opened beneath dir
// without following a symlink; the bytes go to a new file beside the
// target, owned by the owner of dir (the sandbox's workload user, which
// every backend gives the workspace root) with mode's permission bits,
// which is then
// renamed over rel, so a symlink or FIFO the workload left at rel is
// replaced, never written through.
func WriteWorkspaceFile(ctx context.Context, dir, rel string, r io.Reader, mode fs.FileMode) error {
	clean, err := safepath.Clean(rel)
	if err != nil || clean == "." {
		return job.Errorf(job.CodePathEscape, "cannot write %q in the workspace", rel).With("path", rel)
	}
	rootFD, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fileError(err, rel)
	}
	defer unix.Close(rootFD)
	var owner unix.Stat_t
	if err := unix.Fstat(rootFD, &owner); err != nil {
		return fileError(err, rel)
	}
	parent, base := path.Split(clean)
	dfd := rootFD
	if parent != "" {
		if dfd, err = safecopy.OpenBeneath(rootFD, path.Clean(parent), unix.O_RDONLY|unix.O_DIRECTORY); err != nil {
			return fileError(err, rel)
		}
		defer unix.Close(dfd)
	}
	tmp := fmt.Sprintf(".%s.%08x.tmp", base, rand.Uint32())
	if len(tmp) > 255 {
		tmp = fmt.Sprintf(".write.%08x.tmp", rand.Uint32())
	}
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fileError(err, rel)
	}
	f := os.NewFile(uintptr(fd), path.Join(dir, clean))
	err = func() error {
		defer f.Close()
		if err := f.Chown(int(owner.Uid), int(owner.Gid)); err != nil {
			return err
		}
		if _, err := io.Copy(f, ctxReader{ctx, r}); err != nil {
			return err
		}
		// Permission bits only: no set-id file reaches a workspace.
		return f.Chmod(mode.Perm())
	}()
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, base)
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return fileError(err, rel)
	}
	return nil
}

// ctxReader fails a read once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// fileError codes a workspace file operation's failure.
func fileError(err error, rel string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, safecopy.ErrSymlink), errors.Is(err, safecopy.ErrOutside),
		errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return job.Wrap(job.CodePathEscape, err, "the workspace path leaves the workspace or goes through a symlink").With("path", rel)
	}
	return job.Wrap(job.CodeRunIOFailed, err, "cannot access the workspace file").With("path", rel)
}

// ExecCwd checks what every backend refuses in an Exec before starting it
// and returns its cwd, clean and relative to the workspace ("." when
// unset): an empty argv (run.spawn_failed), a cwd that leaves the
// workspace (validation.path_escape).
func ExecCwd(e Exec) (string, error) {
	if len(e.Argv) == 0 {
		return "", job.Errorf(job.CodeRunSpawnFailed, "empty argv")
	}
	if e.Cwd == "" {
		return ".", nil
	}
	cwd, err := safepath.Clean(e.Cwd)
	if err != nil {
		return "", job.Wrap(job.CodePathEscape, err, "the exec's cwd leaves the workspace").With("cwd", e.Cwd)
	}
	return cwd, nil
}
