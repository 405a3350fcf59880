package buildcache

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/safecopy"
)

// Usage is what a cache holds, counted over entries of every type.
type Usage struct {
	// Bytes is the blocks allocated (st_blocks*512), Inodes the entries
	// below the cache's root.
	Bytes, Inodes int64
	// Truncated says the walk stopped early (at the first cap crossed
	// when only measuring, at the entry bound when collecting): the
	// counts are a lower bound.
	Truncated bool
}

// entry is one walked entry, for eviction.
type entry struct {
	rel    string
	blocks int64
	mtime  int64
	dir    bool
}

// testHookWalk, when set, is called with every entry a walk counts.
var testHookWalk func(rel string)

// fits reports whether u is within c's caps.
func (c *Caches) fits(u Usage) bool {
	return u.Bytes <= c.opts.MaxBytes && u.Inodes <= c.opts.MaxInodes
}

// bound is the most entries a collecting walk records: past it the cache
// is reset rather than sorted.
func (c *Caches) bound() int64 { return 2*c.opts.MaxInodes + 1024 }

// measure walks dir with safecopy's walk (descriptor-relative, following
// no symlink, at most safecopy.MaxDepth deep) and stats every entry
// relative to its parent's descriptor. Without collect it stops as soon
// as a cap is crossed; with it, it records the entries, up to bound. A
// missing dir is empty.
func (c *Caches) measure(dir string, collect bool) (Usage, []entry, error) {
	var u Usage
	root, err := safecopy.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return u, nil, nil
	}
	if err != nil {
		return u, nil, err
	}
	defer root.Close()
	d, err := openDirs(dir)
	if err != nil {
		return u, nil, err
	}
	defer d.close()
	var entries []entry
	err = root.Walk(context.Background(), func(rel string, _ safecopy.Info) error {
		var st unix.Stat_t
		if err := d.stat(rel, &st); err != nil {
			if gone(err) {
				return nil // changed since it was listed
			}
			return err
		}
		if testHookWalk != nil {
			testHookWalk(rel)
		}
		u.Inodes++
		u.Bytes += st.Blocks * 512
		if !collect {
			if !c.fits(u) {
				u.Truncated = true
				return fs.SkipAll
			}
			return nil
		}
		if u.Inodes > c.bound() {
			u.Truncated = true
			return fs.SkipAll
		}
		entries = append(entries, entry{rel: rel, blocks: st.Blocks * 512, mtime: st.Mtim.Nano(), dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
		return nil
	})
	return u, entries, err
}

// gone is an entry that vanished or was swapped for a link under a walk.
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV)
}

// dirs keeps open the directories on the path of a walk (or the last one
// an eviction used), so each entry is stat'ed and removed relative to its
// parent's descriptor. Every directory is opened beneath the root with
// safecopy.OpenBeneath: no symlink is followed on the way.
type dirs struct {
	root int
	rels []string
	fds  []int
}

func openDirs(dir string) (*dirs, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &dirs{root: fd}, nil
}

// parent returns the descriptor of rel's directory and rel's last
// component.
func (d *dirs) parent(rel string) (int, string, error) {
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		return d.root, base, nil
	}
	for n := len(d.rels); n > 0; n = len(d.rels) {
		top := d.rels[n-1]
		if top == dir {
			return d.fds[n-1], base, nil
		}
		if strings.HasPrefix(dir, top+"/") {
			break
		}
		unix.Close(d.fds[n-1])
		d.rels, d.fds = d.rels[:n-1], d.fds[:n-1]
	}
	fd, err := safecopy.OpenBeneath(d.root, dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", err
	}
	d.rels, d.fds = append(d.rels, dir), append(d.fds, fd)
	return fd, base, nil
}

// stat lstats rel relative to its parent.
func (d *dirs) stat(rel string, st *unix.Stat_t) error {
	fd, base, err := d.parent(rel)
	if err != nil {
		return err
	}
	return unix.Fstatat(fd, base, st, unix.AT_SYMLINK_NOFOLLOW)
}

// remove unlinks the non-directory rel relative to its parent; a
// directory (swapped in since the walk) is refused by the kernel.
func (d *dirs) remove(rel string) error {
	fd, base, err := d.parent(rel)
	if err != nil {
		return err
	}
	return unix.Unlinkat(fd, base, 0)
}

func (d *dirs) close() {
	for _, fd := range d.fds {
		unix.Close(fd)
	}
	unix.Close(d.root)
}
