package backend

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
)

// MoveIntoWorkspace moves every entry of staged (a directory the host
// filled, out of any sandbox's reach: a snapshot) into the workspace
// root dir of a live sandbox, owned by dir's owner (the sandbox's
// workload user, as WriteWorkspaceFile's files are): a warm pool's
// sandbox gets its caller's workspace this way. Every step is
// fd-relative and no-follow: staged and dir are opened O_NOFOLLOW, the
// staged tree is given to the owner entry by entry (fchownat without
// following, directories entered by openat O_NOFOLLOW), and each top
// entry is renamed into dir without replacing anything there
// (RENAME_NOREPLACE: a name the sandbox already holds is an error, never
// overwritten). staged and dir must be on one filesystem. staged is left
// empty.
func MoveIntoWorkspace(staged, dir string) error {
	dst, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fillError(err)
	}
	defer unix.Close(dst)
	var owner unix.Stat_t
	if err := unix.Fstat(dst, &owner); err != nil {
		return fillError(err)
	}
	src, err := unix.Open(staged, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fillError(err)
	}
	defer unix.Close(src)
	if err := chownBeneath(src, int(owner.Uid), int(owner.Gid), 0); err != nil {
		return fillError(err)
	}
	names, err := dirNames(src)
	if err != nil {
		return fillError(err)
	}
	for _, name := range names {
		if err := unix.Renameat2(src, name, dst, name, unix.RENAME_NOREPLACE); err != nil {
			return fillError(err)
		}
	}
	return nil
}

// chownBeneath gives every entry beneath the directory dfd to uid:gid,
// following nothing.
func chownBeneath(dfd, uid, gid, depth int) error {
	if depth >= safecopy.MaxDepth {
		return safecopy.ErrTooDeep
	}
	names, err := dirNames(dfd)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := unix.Fchownat(dfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		cfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		err = chownBeneath(cfd, uid, gid, depth+1)
		unix.Close(cfd)
		if err != nil {
			return err
		}
	}
	return nil
}

// dirNames lists the directory fd's entries (without "." and "..").
func dirNames(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var names []string
	buf := make([]byte, 8192)
	defer unix.Close(dup)
	for {
		n, err := unix.ReadDirent(dup, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// fillError is a failed MoveIntoWorkspace: a link where a directory was
// expected is validation.path_escape, anything else run.io_failed.
func fillError(err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return job.Wrap(job.CodePathEscape, err, "a workspace directory is a link")
	}
	return job.Wrap(job.CodeRunIOFailed, err, "cannot move the workspace into the sandbox")
}
