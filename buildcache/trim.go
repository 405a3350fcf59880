package buildcache

import (
	"errors"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// Trimmed says what Trim did.
type Trimmed struct {
	// Usage is the cache before eviction (a lower bound when Truncated).
	Usage Usage
	// Busy is true when the cache was over a cap but a job held it:
	// nothing was removed, and the cache stays unmounted until the last
	// job's release trims it.
	Busy bool
	// Evicted is how many entries were removed, EvictedBytes their blocks.
	Evicted      int
	EvictedBytes int64
	// Reset is true when the cache was removed whole: it had more entries
	// than a walk records, could not be walked, or its directories alone
	// were over a cap.
	Reset bool
}

// testHookBeforeEvict, when set, runs between the collecting walk and the
// eviction, under the exclusive lock.
var testHookBeforeEvict func()

// Trim measures cache name of namespace ns and, when it is over a cap,
// brings it back under: it takes the cache's lock exclusively without
// waiting (Busy while a job holds it), walks it again and removes the
// least recently modified non-directories until it fits, or resets it
// whole. While over a cap the cache is marked so that Acquire does not
// mount it. The walks are safecopy's; nothing outside the cache is ever
// stat'ed or removed.
func (c *Caches) Trim(ns, name string) (Trimmed, error) {
	var t Trimmed
	if !ValidName(name) || !ValidNamespace(ns) {
		return t, errors.New("invalid cache namespace or name")
	}
	dir := c.Path(ns, name)
	u, _, err := c.measure(dir, false)
	t.Usage = u
	if err == nil && c.fits(u) {
		return t, c.setOver(ns, name, false)
	}
	if err := c.setOver(ns, name, true); err != nil {
		return t, err
	}
	lock, lerr := c.lock(ns, name, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(lerr, unix.EWOULDBLOCK) {
		t.Busy = true
		return t, nil
	}
	if lerr != nil {
		return t, lerr
	}
	trash, err := c.trimLocked(ns, name, &t)
	lock.Close()
	if trash != "" {
		c.removeNow(trash)
	}
	return t, err
}

// trimLocked is Trim under the exclusive lock. It returns the trash
// directory a reset cache was renamed into, for removal after unlocking.
func (c *Caches) trimLocked(ns, name string, t *Trimmed) (string, error) {
	dir := c.Path(ns, name)
	u, entries, err := c.measure(dir, true)
	t.Usage = u
	if testHookBeforeEvict != nil {
		testHookBeforeEvict()
	}
	if err == nil && !u.Truncated {
		var done bool
		done, err = c.evict(dir, u, entries, t)
		if err == nil && done {
			return "", c.setOver(ns, name, false)
		}
	}
	// Unwalkable, too many entries, or over a cap with nothing left to
	// evict: start the cache again.
	trash, rerr := c.reset(ns, name)
	if rerr != nil {
		return "", errors.Join(err, rerr)
	}
	t.Reset = true
	return trash, c.setOver(ns, name, false)
}

// evict removes the least recently modified non-directories of dir until
// the usage fits, and reports whether it does.
func (c *Caches) evict(dir string, u Usage, entries []entry, t *Trimmed) (bool, error) {
	var dirU Usage
	var files []entry
	for _, e := range entries {
		if e.dir {
			dirU.Inodes++
			dirU.Bytes += e.blocks
		} else {
			files = append(files, e)
		}
	}
	if !c.fits(dirU) {
		return false, nil // directories alone are over: reset
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].mtime < files[j].mtime })
	d, err := openDirs(dir)
	if err != nil {
		return false, err
	}
	defer d.close()
	for _, f := range files {
		if c.fits(u) {
			break
		}
		if err := d.remove(f.rel); err != nil && !gone(err) {
			if errors.Is(err, unix.EISDIR) {
				continue // a directory swapped in since the walk
			}
			return false, err
		}
		u.Inodes--
		u.Bytes -= f.blocks
		t.Evicted++
		t.EvictedBytes += f.blocks
	}
	return c.fits(u), nil
}

// reset renames cache name away into the trash (the next Acquire creates
// it empty) and returns where it went. The caller holds its lock
// exclusively.
func (c *Caches) reset(ns, name string) (string, error) {
	trash, err := os.MkdirTemp(filepath.Join(c.dir, trashDir), ns+"."+name+"-")
	if err != nil {
		return "", err
	}
	if err := os.Rename(c.Path(ns, name), filepath.Join(trash, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		os.Remove(trash)
		return "", err
	}
	return trash, nil
}
