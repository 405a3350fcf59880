package buildcache

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Collect removes every cache, of every namespace, whose last use is
// older than maxAge at now, skipping caches a job holds, and returns the
// ones it removed as "<namespace>/<name>". A removed cache is renamed into
// the trash under its lock and deleted in the background, so Collect does
// not walk it. Scratch directories older than maxAge (left by a process
// that stopped) go too. Lock files stay (a few bytes each): removing one
// that a job is about to lock would let an eviction and that job hold
// different locks.
func (c *Caches) Collect(now time.Time, maxAge time.Duration) ([]string, error) {
	namespaces, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, n := range namespaces {
		ns := n.Name()
		if !n.IsDir() || !ValidNamespace(ns) {
			continue
		}
		got, err := c.collectNamespace(ns, now, maxAge)
		removed = append(removed, got...)
		if err != nil {
			errs = append(errs, err)
		}
		c.collectScratch(ns, now, maxAge)
	}
	return removed, errors.Join(errs...)
}

func (c *Caches) collectNamespace(ns string, now time.Time, maxAge time.Duration) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(c.dir, ns, lockDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !ValidName(name) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < maxAge {
			continue
		}
		if _, err := os.Lstat(c.Path(ns, name)); errors.Is(err, os.ErrNotExist) {
			continue // collected before
		}
		lock, err := c.lock(ns, name, unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Checked again under the lock: a job may have used it meanwhile.
		if fi, err := lock.Stat(); err == nil && now.Sub(fi.ModTime()) >= maxAge {
			if trash, err := c.reset(ns, name); err != nil {
				errs = append(errs, err)
			} else {
				removed = append(removed, ns+"/"+name)
				c.removeLater(trash)
				_ = c.setOver(ns, name, false)
			}
		}
		lock.Close()
	}
	return removed, errors.Join(errs...)
}

// collectScratch removes the scratch directories of ns older than maxAge.
func (c *Caches) collectScratch(ns string, now time.Time, maxAge time.Duration) {
	dir := filepath.Join(c.dir, ns, scratchDir)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) >= maxAge {
			c.removeLater(filepath.Join(dir, e.Name()))
		}
	}
}
