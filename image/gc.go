package image

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
)

// A lease is leases/<id>: a file naming a rootfs (its chain id), held
// open with a shared flock by the process that took it. GC takes each
// lease's lock without waiting: when it gets it, the holder is gone (a
// crash releases its flocks) and the lease is stale.

// lease records a lease on chainID and returns its release.
func (s *Store) lease(chainID string) (func(), error) {
	p := filepath.Join(s.dir, "leases", uuid.NewString())
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot lease the image")
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		f.Close()
		os.Remove(p)
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot lease the image")
	}
	if _, err := f.WriteString(chainID + "\n"); err != nil {
		f.Close()
		os.Remove(p)
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot lease the image")
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			os.Remove(p)
			f.Close()
		})
	}, nil
}

// liveLeases returns the chain ids live leases hold, removing stale ones.
func (s *Store) liveLeases() (map[string]bool, error) {
	dir := filepath.Join(s.dir, "leases")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot list image leases")
	}
	live := map[string]bool{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(p)
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			// Nobody holds it: its process ended without releasing.
			os.Remove(p)
			f.Close()
			continue
		}
		f.Close()
		live[strings.TrimSpace(string(b))] = true
	}
	return live, nil
}

// GC removes what nothing uses: rootfs directories that no image record
// and no live lease names, stale leases, and imports under tmp/ that no
// live process holds (a crash left them). It returns the removed
// directories' names.
func (s *Store) GC() ([]string, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	used, err := s.liveLeases()
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(s.dir, "images"))
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot list images")
	}
	for _, e := range ents {
		hex, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		info, err := s.readRecord("sha256:" + hex)
		if err != nil {
			return nil, err
		}
		used[info.ChainID] = true
	}
	var removed []string
	roots, err := os.ReadDir(filepath.Join(s.dir, "rootfs"))
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot list the rootfs cache")
	}
	for _, e := range roots {
		if used["sha256:"+e.Name()] {
			continue
		}
		if err := removeTree(filepath.Join(s.dir, "rootfs", e.Name())); err != nil {
			return removed, err
		}
		removed = append(removed, "rootfs/"+e.Name())
	}
	tmps, err := os.ReadDir(filepath.Join(s.dir, "tmp"))
	if err != nil {
		return removed, job.Wrap(job.CodeRunIOFailed, err, "cannot list the image store's tmp")
	}
	for _, e := range tmps {
		p := filepath.Join(s.dir, "tmp", e.Name())
		if held(p) {
			continue
		}
		if err := removeTree(p); err != nil {
			return removed, err
		}
		removed = append(removed, "tmp/"+e.Name())
	}
	return removed, nil
}

// held reports whether a live import holds the directory p (a flock on
// the directory itself, see staging).
func held(p string) bool {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil
}

// staging makes a directory under tmp/ held (flocked) by this process
// until done, which removes it.
func (s *Store) staging(prefix string) (string, func(), error) {
	p, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), prefix)
	if err != nil {
		return "", nil, job.Wrap(job.CodeRunIOFailed, err, "cannot make an import directory")
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Flock(fd, unix.LOCK_EX)
	}
	if err != nil {
		os.Remove(p)
		return "", nil, job.Wrap(job.CodeRunIOFailed, err, "cannot hold an import directory")
	}
	return p, func() {
		removeTree(p)
		unix.Close(fd)
	}, nil
}

// removeTree removes p and everything below it, first giving its owner
// write and search on every directory (an image's 0555 directories) so
// that it works without root too. No symlink is followed.
func removeTree(p string) error {
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			unix.Fchmodat(unix.AT_FDCWD, q, 0o700, 0)
		}
		return nil
	})
	if err := os.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot remove from the image store").With("path", p)
	}
	return nil
}
