package safecopy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"golang.org/x/sys/unix"
)

// WalkFunc is called for every entry Walk finds, with its clean path
// relative to the root and its lstat information. Returning fs.SkipDir
// from a directory skips its contents; fs.SkipAll ends the walk without
// an error; any other error ends it with that error.
type WalkFunc func(rel string, info Info) error

// Walk calls fn for every entry below r in lexical order, parents before
// children. Nothing is followed: a symlink is reported as one, and a
// directory is entered by openat(O_NOFOLLOW|O_DIRECTORY) on its parent's
// descriptor, so a directory swapped for a link after it was listed is
// not entered. ctx is checked before every entry.
func (r *Root) Walk(ctx context.Context, fn WalkFunc) error {
	fd, err := unix.Openat(r.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return classify("open", r.name, err)
	}
	err = walkDir(ctx, fd, ".", 0, fn)
	unix.Close(fd)
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

func walkDir(ctx context.Context, dfd int, rel string, depth int, fn WalkFunc) error {
	names, err := readNames(dfd)
	if err != nil {
		return classify("readdir", rel, err)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		child := path.Join(rel, name)
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed since it was listed
			}
			return classify("lstat", child, err)
		}
		info := infoOf(&st)
		err := fn(child, info)
		if !info.Mode.IsDir() {
			if err != nil && !errors.Is(err, fs.SkipDir) {
				return err
			}
			continue
		}
		if errors.Is(err, fs.SkipDir) {
			continue
		}
		if err != nil {
			return err
		}
		if depth+1 >= MaxDepth {
			return fmt.Errorf("%s: %w (%d levels)", child, ErrTooDeep, MaxDepth)
		}
		cfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOENT) {
			continue // no longer a directory: a link or file was swapped in
		}
		if err != nil {
			return classify("open", child, err)
		}
		err = walkDir(ctx, cfd, child, depth+1, fn)
		unix.Close(cfd)
		if err != nil {
			return err
		}
	}
	return nil
}

// readNames lists a directory's entries (without "." and "..").
func readNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
