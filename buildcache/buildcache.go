// Package buildcache keeps the persistent build caches jobs ask for with
// workspace.caches. A cache belongs to its caller: it lives in the
// caller's namespace, <store>/caches/<namespace>/<name>, so two callers
// naming one cache get two directories and neither can plant an entry the
// other's build trusts. The namespace is never taken from the request: the
// door that accepted the job sets it (TokenNamespace over HTTP,
// LocalNamespace for this host's own processes), and only the names the
// operator declares shared live in SharedNamespace.
//
// A job holds a shared lock on its caches while it runs, so any number of
// jobs use one cache at once (the tools that own these caches, Go's build
// cache among them, are safe for concurrent use); eviction and garbage
// collection take the lock exclusively and never wait for a job, and no
// job waits for them: a job that finds its cache being trimmed, or over a
// cap, gets an empty scratch directory in its place for that run.
//
// Two caps bound each cache: MaxBytes on the blocks allocated (st_blocks,
// so sparse files count what they hold and directories, symlinks and
// empty files count what they take) and MaxInodes on the number of
// entries of every type. They are measured after each job that used the
// cache, in the background (Release never walks the cache), through
// descriptor-relative walks that follow no symlink (package safecopy).
package buildcache

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults for a runner that configures none.
const (
	DefaultMaxBytes  = 2 << 30
	DefaultMaxInodes = 100_000
	DefaultMaxAge    = 7 * 24 * time.Hour
)

// The host's own directories beside the caches of a namespace; no job can
// reach them, and their dot keeps them apart from cache names.
const (
	// lockDir holds one lock file per cache. Its mtime is the cache's
	// last use.
	lockDir = ".locks"
	// overDir holds a marker per cache that was last measured over a cap:
	// it is not mounted until a trim brings it back under.
	overDir = ".over"
	// scratchDir holds the empty directories jobs get instead of a cache
	// that is over a cap or being trimmed.
	scratchDir = ".scratch"
)

// trashDir, beside the namespaces, holds trees renamed away to be removed
// in the background (a reset cache, a used scratch directory).
const trashDir = ".trash"

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidName reports whether name may name a cache: it becomes a directory
// name, so no slash and no dot first.
func ValidName(name string) bool { return validName.MatchString(name) }

// Options configures Caches. Zero values take the defaults.
type Options struct {
	// MaxBytes caps the blocks of each cache (st_blocks*512 summed over
	// every entry), MaxInodes its entries of every type.
	MaxBytes, MaxInodes int64
	// Report hears the outcome of every background trim (logging); it is
	// called from the trimming goroutine.
	Report func(ns, name string, t Trimmed, err error)
}

// Caches is the set of caches under one directory.
type Caches struct {
	dir  string
	opts Options
	// sem bounds the trims and removals running at once.
	sem chan struct{}
	mu  sync.Mutex
	// trimming holds the caches a background trim runs for; true asks for
	// another pass once it ends.
	trimming map[string]bool
	wg       sync.WaitGroup
}

// Open returns the caches under dir, creating it. A store laid out by an
// earlier version (caches shared by every caller, dir/<name>) has its
// caches moved to the trash and removed in the background: they may hold
// entries any caller planted.
func Open(dir string, opts Options) (*Caches, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxInodes <= 0 {
		opts.MaxInodes = DefaultMaxInodes
	}
	if err := os.MkdirAll(filepath.Join(dir, trashDir), 0o700); err != nil {
		return nil, err
	}
	c := &Caches{dir: dir, opts: opts, sem: make(chan struct{}, 2), trimming: map[string]bool{}}
	if err := c.retireLegacy(); err != nil {
		return nil, err
	}
	// Left by a process that stopped while removing them.
	if entries, err := os.ReadDir(filepath.Join(dir, trashDir)); err == nil {
		for _, e := range entries {
			c.removeLater(filepath.Join(dir, trashDir, e.Name()))
		}
	}
	return c, nil
}

// retireLegacy moves the caches of the shared layout (dir/.locks beside
// dir/<name>) into the trash.
func (c *Caches) retireLegacy() error {
	if fi, err := os.Lstat(filepath.Join(c.dir, lockDir)); err != nil || !fi.IsDir() {
		return nil
	}
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return err
	}
	dst, err := os.MkdirTemp(filepath.Join(c.dir, trashDir), "legacy-")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == trashDir {
			continue
		}
		// Another process may have moved it first.
		if err := os.Rename(filepath.Join(c.dir, e.Name()), filepath.Join(dst, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Dir is where the caches live.
func (c *Caches) Dir() string { return c.dir }

// Path is where cache name of namespace ns lives.
func (c *Caches) Path(ns, name string) string { return filepath.Join(c.dir, ns, name) }

// Reasons a Lease is not the cache itself.
const (
	NotMountedOverCap  = "over_cap"
	NotMountedTrimming = "trimming"
)

// Lease is one job's use of one cache.
type Lease struct {
	// Dir is the directory to bind into the job's sandbox: the cache, or
	// an empty scratch directory when NotMounted says why the cache was
	// not mounted (NotMountedOverCap, NotMountedTrimming).
	Dir        string
	NotMounted string
	c          *Caches
	ns, name   string
	lock       *os.File
}

// Acquire leases cache name of namespace ns without ever waiting: it
// takes a shared lock on the cache, creates its directory if needed and
// marks it used now. A cache last measured over a cap, or held
// exclusively by a trim or collection, is not mounted: the lease is an
// empty scratch directory instead, and a trim is started.
func (c *Caches) Acquire(ns, name string) (*Lease, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("invalid cache name %q", name)
	}
	if !ValidNamespace(ns) {
		return nil, fmt.Errorf("invalid cache namespace %q", ns)
	}
	for _, d := range []string{lockDir, overDir, scratchDir} {
		if err := os.MkdirAll(filepath.Join(c.dir, ns, d), 0o755); err != nil {
			return nil, err
		}
	}
	if c.over(ns, name) {
		c.TrimLater(ns, name)
		return c.scratch(ns, name, NotMountedOverCap)
	}
	lock, err := c.lock(ns, name, unix.LOCK_SH|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return c.scratch(ns, name, NotMountedTrimming)
	}
	if err != nil {
		return nil, err
	}
	dir := c.Path(ns, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		lock.Close()
		return nil, err
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		lock.Close()
		return nil, fmt.Errorf("cache %s is not a directory", name)
	}
	touch(lock)
	return &Lease{Dir: dir, c: c, ns: ns, name: name, lock: lock}, nil
}

// scratch makes the empty directory a job gets instead of cache name.
func (c *Caches) scratch(ns, name, why string) (*Lease, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(c.dir, ns, scratchDir, name+"-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	return &Lease{Dir: dir, NotMounted: why, c: c, ns: ns, name: name}, nil
}

// Release marks the cache used now, drops the lease's lock and starts a
// background trim of the cache; a scratch directory is removed in the
// background. It never walks the cache itself.
func (l *Lease) Release() {
	if l.lock == nil {
		l.c.removeLater(l.Dir)
		return
	}
	touch(l.lock)
	l.lock.Close()
	l.c.TrimLater(l.ns, l.name)
}

// lock opens the lock file of cache name in ns and flocks it with how
// (LOCK_SH, LOCK_EX, possibly |LOCK_NB).
func (c *Caches) lock(ns, name string, how int) (*os.File, error) {
	if err := os.MkdirAll(filepath.Join(c.dir, ns, lockDir), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(c.dir, ns, lockDir, name), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
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

// over reports whether cache name was last measured over a cap.
func (c *Caches) over(ns, name string) bool {
	_, err := os.Lstat(filepath.Join(c.dir, ns, overDir, name))
	return err == nil
}

// setOver records whether cache name is over a cap.
func (c *Caches) setOver(ns, name string, over bool) error {
	p := filepath.Join(c.dir, ns, overDir, name)
	if !over {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

func touch(f *os.File) {
	now := time.Now()
	_ = os.Chtimes(f.Name(), now, now) // last use is advisory
}
