package safecopy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// This file reads the entries a walk listed (Walk, ReadDir) a second
// time: their paths hold names as the directory has them, and what is
// opened must be what was listed. A job can swap a directory of the tree
// for a symlink between the listing and the read; resolution from the
// root without following any symlink keeps the read inside the tree, and
// the device and inode check makes sure it reads the very file listed.

// DirEntry is one entry of a directory ReadDir listed.
type DirEntry struct {
	Name string
	Info Info
	// Target is a symlink's target, read with readlinkat on the listed
	// directory ("" for anything else).
	Target string
}

// ReadDir lists the directory rel beneath r (rel "." for r itself) in
// lexical order, with each entry's lstat information; entries removed
// while it is read are left out. rel is resolved like Lstat's.
func (r *Root) ReadDir(rel string) ([]DirEntry, error) {
	clean, err := nameRel(rel)
	if err != nil {
		return nil, err
	}
	fd, err := OpenBeneath(r.fd, clean, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, classify("open", clean, err)
	}
	defer unix.Close(fd)
	names, err := readNames(fd)
	if err != nil {
		return nil, classify("readdir", clean, err)
	}
	sort.Strings(names)
	out := make([]DirEntry, 0, len(names))
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return nil, classify("lstat", path.Join(clean, name), err)
		}
		e := DirEntry{Name: name, Info: infoOf(&st)}
		if e.Info.Mode&fs.ModeSymlink != 0 {
			e.Target, err = readlinkat(fd, name)
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
				continue // removed or replaced since the lstat
			}
			if err != nil {
				return nil, classify("readlink", path.Join(clean, name), err)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// Readlink returns the target of the symlink rel, read with readlinkat on
// its parent directory (resolved without following a symlink). rel is
// resolved like Lstat's.
func (r *Root) Readlink(rel string) (string, error) {
	clean, err := nameRel(rel)
	if err != nil {
		return "", err
	}
	dfd, base, err := r.parent(clean)
	if err != nil {
		return "", err
	}
	defer closeParent(r, dfd)
	target, err := readlinkat(dfd, base)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: clean, Err: err}
	}
	return target, nil
}

// OpenListed is Open for the regular file rel that a walk of r reported
// as seen: the file opened must be that same file (device and inode),
// else ErrChanged. rel is resolved like Lstat's.
func (r *Root) OpenListed(rel string, seen Info) (*os.File, Info, error) {
	clean, err := nameRel(rel)
	if err != nil {
		return nil, Info{}, err
	}
	f, now, err := r.open(clean)
	if err != nil {
		return nil, Info{}, err
	}
	if now.Dev != seen.Dev || now.Ino != seen.Ino {
		f.Close()
		return nil, Info{}, fmt.Errorf("%s: listed as inode %d:%d, opened %d:%d: %w", clean, seen.Dev, seen.Ino, now.Dev, now.Ino, ErrChanged)
	}
	return f, now, nil
}

// CopyListed is CopyFile for an entry a walk reported as seen, opened
// with OpenListed. dst gets only the permission bits that both the walk
// and the open saw (seen.Mode & the file's mode now, before umask): a
// file is never written more readable than it was listed.
func (r *Root) CopyListed(ctx context.Context, rel, dst string, seen Info, limit int64) (Copied, error) {
	f, now, err := r.OpenListed(rel, seen)
	if err != nil {
		return Copied{}, err
	}
	defer f.Close()
	return writeFile(ctx, f, now, rel, dst, seen.Mode.Perm()&now.Mode.Perm(), limit)
}

// SumListed returns the size and SHA-256 of an entry a walk reported as
// seen, opened with OpenListed and read under Copy's cap rules.
func (r *Root) SumListed(ctx context.Context, rel string, seen Info, limit int64) (Copied, error) {
	f, now, err := r.OpenListed(rel, seen)
	if err != nil {
		return Copied{}, err
	}
	defer f.Close()
	if limit >= 0 && now.Size > limit {
		return Copied{}, fmt.Errorf("%s: %d bytes, cap %d: %w", rel, now.Size, limit, ErrTooLarge)
	}
	h := sha256.New()
	n, err := copyCapped(ctx, h, f, limit)
	if err != nil {
		return Copied{}, grewPast(rel, limit, err)
	}
	return Copied{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// nameRel accepts a path as Walk reports it: relative, clean, without
// ".." and with names holding any byte a directory entry can (a
// backslash, a newline, invalid UTF-8), which safepath's rules for paths
// people write refuse. Anything else goes through those rules.
func nameRel(rel string) (string, error) {
	if rel != "" && rel[0] != '/' && path.Clean(rel) == rel && rel != ".." &&
		!strings.HasPrefix(rel, "../") && !strings.ContainsRune(rel, 0) {
		return rel, nil
	}
	return cleanRel(rel)
}

// readlinkat reads a symlink's target whatever its length.
func readlinkat(dfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		if size > 1<<16 {
			return "", unix.ENAMETOOLONG
		}
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}
