// Package buildcache keeps the persistent build caches jobs ask for with
// workspace.caches: one directory per name under the runner's store
// (<store>/caches/<name>), shared by every job that names it, across jobs
// and runner restarts. A job holds a shared lock on its caches while it
// runs, so any number of jobs use one cache at once (the tools that own
// these caches, Go's build cache among them, are safe for concurrent
// use); eviction and garbage collection take the lock exclusively and
// never wait for a job: a cache in use is left for the next pass.
//
// The size cap is checked after each job that used the cache, not while
// it runs: the job that crosses it finishes, then the oldest files (by
// modification time, which Go's cache refreshes on use) are removed until
// the cache fits again. A cache no job used for MaxAge is removed whole.
package buildcache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults for a runner that configures neither.
const (
	DefaultMaxBytes = 2 << 30
	DefaultMaxAge   = 7 * 24 * time.Hour
)

// lockDir holds one lock file per cache, beside the caches rather than in
// them, so no job can remove or replace its own cache's lock. Its mtime
// is the cache's last use.
const lockDir = ".locks"

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidName reports whether name may name a cache: it becomes a directory
// name, so no slash and no dot first.
func ValidName(name string) bool { return validName.MatchString(name) }

// Caches is the set of caches under one directory.
type Caches struct {
	dir string
}

// Open returns the caches under dir, creating it.
func Open(dir string) (*Caches, error) {
	if err := os.MkdirAll(filepath.Join(dir, lockDir), 0o755); err != nil {
		return nil, err
	}
	return &Caches{dir: dir}, nil
}

// Dir is where the caches live.
func (c *Caches) Dir() string { return c.dir }

// Lease is one job's use of one cache.
type Lease struct {
	// Dir is the cache's directory, to bind into the job's sandbox.
	Dir  string
	lock *os.File
}

// Acquire takes a shared lock on the cache name (waiting only while an
// eviction or collection holds it), creates its directory if needed and
// marks it used now.
func (c *Caches) Acquire(name string) (*Lease, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("invalid cache name %q", name)
	}
	lock, err := c.lock(name, unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		lock.Close()
		return nil, err
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		lock.Close()
		return nil, fmt.Errorf("cache %s is not a directory", name)
	}
	touch(lock)
	return &Lease{Dir: dir, lock: lock}, nil
}

// Release marks the cache used now and drops the lease's lock.
func (l *Lease) Release() {
	touch(l.lock)
	l.lock.Close()
}

// lock opens name's lock file and flocks it with how (LOCK_SH, LOCK_EX,
// possibly |LOCK_NB).
func (c *Caches) lock(name string, how int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(c.dir, lockDir, name), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func touch(f *os.File) {
	now := time.Now()
	_ = os.Chtimes(f.Name(), now, now) // last use is advisory
}

// Trimmed says what Trim did.
type Trimmed struct {
	// Busy is true when another job held the cache: nothing was measured.
	Busy bool
	// Bytes is the size of the cache's regular files before eviction,
	// Evicted how many files were removed and EvictedBytes their size.
	Bytes, EvictedBytes int64
	Evicted             int
}

// Trim measures the cache name and, when its regular files hold more
// than maxBytes, removes the least recently modified ones until they fit.
// It takes the cache's lock exclusively without waiting: while a job uses
// the cache, Trim reports Busy and the last job to finish trims.
func (c *Caches) Trim(name string, maxBytes int64) (Trimmed, error) {
	var t Trimmed
	lock, err := c.lock(name, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		t.Busy = true
		return t, nil
	}
	if err != nil {
		return t, err
	}
	defer lock.Close()
	type file struct {
		path  string
		size  int64
		mtime time.Time
	}
	var files []file
	// No job holds the cache, so nothing changes under the walk; links
	// a job left are neither followed nor counted.
	err = filepath.WalkDir(filepath.Join(c.dir, name), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, file{p, info.Size(), info.ModTime()})
		t.Bytes += info.Size()
		return nil
	})
	if err != nil || t.Bytes <= maxBytes {
		return t, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mtime.Before(files[j].mtime) })
	for _, f := range files {
		if t.Bytes-t.EvictedBytes <= maxBytes {
			break
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return t, err
		}
		t.Evicted++
		t.EvictedBytes += f.size
	}
	return t, nil
}

// Collect removes every cache whose last use is older than maxAge at now,
// skipping caches a job holds, and returns the names it removed. Lock
// files stay (a few bytes each): removing one that a job is about to lock
// would let an eviction and that job hold different locks.
func (c *Caches) Collect(now time.Time, maxAge time.Duration) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(c.dir, lockDir))
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
		dir := filepath.Join(c.dir, name)
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			continue // collected before
		}
		lock, err := c.lock(name, unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Checked again under the lock: a job may have used it meanwhile.
		if fi, err := lock.Stat(); err == nil && now.Sub(fi.ModTime()) >= maxAge {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, err)
			} else {
				removed = append(removed, name)
			}
		}
		lock.Close()
	}
	return removed, errors.Join(errs...)
}
