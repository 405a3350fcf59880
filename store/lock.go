package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// LockFile is the store's ownership lock, <dir>/.lock. Any number of
// processes use one store at once (ids are claimed atomically, and each
// run is locked while it executes, see LockRun); one process at a time may
// own it (Own): the one that recovers and retains what no live process
// holds (serve). Its content names the owner for the error a refused
// process prints.
const LockFile = ".lock"

// RunLocksDir holds one lock file per run (<dir>/locks/<job_id>), flocked
// by the process executing that run from the start of an attempt to its
// record; kept beside runs/ so a run directory stays seed 002's layout.
const RunLocksDir = "locks"

// Owner is the content of the lock file.
type Owner struct {
	PID      int       `json:"pid"`
	Hostname string    `json:"hostname"`
	Command  string    `json:"command"`
	Since    time.Time `json:"since"`
}

// processLock is one process's hold on a store's lock file. flock locks
// belong to an open file, so a second open of the same file in the same
// process would refuse the first; every Own in this process therefore
// shares one hold, counted, and the flock goes with the last Close.
type processLock struct {
	f    *os.File
	refs int
}

var (
	locksMu sync.Mutex
	locks   = map[string]*processLock{}
)

// Own makes this process the store's owner until Close (or its exit): a
// store another process owns is job.conflict naming that process. Owners
// in one process share one hold.
func (s *Store) Own() error {
	var err error
	s.own.Do(func() {
		if err = acquire(s.dir); err == nil {
			s.owned = true
		}
	})
	return err
}

// acquire takes (or shares, within this process) the owner lock of the
// store at dir.
func acquire(dir string) error {
	locksMu.Lock()
	defer locksMu.Unlock()
	if l := locks[dir]; l != nil {
		l.refs++
		return nil
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot open the store lock").With("path", path)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return inUse(dir, path)
		}
		return job.Wrap(job.CodeRunIOFailed, err, "cannot lock the store").With("path", path)
	}
	host, _ := os.Hostname()
	b, _ := json.Marshal(Owner{PID: os.Getpid(), Hostname: host, Command: strings.Join(os.Args, " "), Since: time.Now().UTC()})
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(append(b, '\n'), 0)
	}
	locks[dir] = &processLock{f: f, refs: 1}
	return nil
}

// inUse is the error for a store another process owns: job.conflict with
// the owner's pid, command and start time when the lock file names them.
func inUse(dir, path string) error {
	var o Owner
	// The owner writes its name just after taking the lock.
	for range 20 {
		b, err := os.ReadFile(path)
		if err == nil && json.Unmarshal(b, &o) == nil && o.PID != 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if o.PID == 0 {
		return job.Errorf(job.CodeJobConflict, "store %s is owned by another process (see %s)", dir, path).With("store_dir", dir)
	}
	return job.Errorf(job.CodeJobConflict, "store %s is owned by %s", dir, o).
		With("store_dir", dir).With("pid", o.PID).With("hostname", o.Hostname).
		With("command", o.Command).With("since", o.Since)
}

// release drops one hold of the owner lock of the store at dir.
func release(dir string) {
	locksMu.Lock()
	defer locksMu.Unlock()
	l := locks[dir]
	if l == nil {
		return
	}
	if l.refs--; l.refs > 0 {
		return
	}
	delete(locks, dir)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}

// String names the owner: pid, host, command line and start time.
func (o Owner) String() string {
	return fmt.Sprintf("pid %d on %s (%s) since %s", o.PID, o.Hostname, o.Command, o.Since.Format(time.RFC3339))
}

// runLockPoll is how often a waiting LockRun tries again.
const runLockPoll = 20 * time.Millisecond

// ErrRunLocked is Lock's answer, without wait, for a record another
// process (or another attempt of this one) has in progress.
var ErrRunLocked = errors.New("the run is executing in another process")

// LockRun takes the lock of run id for one attempt (Records.Lock of the
// jobs); unlock releases it.
func (s *Store) LockRun(ctx context.Context, id string, wait bool) (unlock func(), err error) {
	return s.jobs.Lock(ctx, id, wait)
}

// RunLocked reports whether a process is executing run id now.
func (s *Store) RunLocked(id string) bool { return s.jobs.Locked(id) }

// lockPath is the lock file of record id.
func (r *Records) lockPath(id string) string { return filepath.Join(r.locks, id) }

// Lock takes the lock of record id while this process has it in
// progress (a job's attempt, a capability run); unlock releases it. A
// record held elsewhere is ErrRunLocked, or with wait is waited for
// until ctx ends. The lock goes with the process, so a record whose
// process died is free.
func (r *Records) Lock(ctx context.Context, id string, wait bool) (unlock func(), err error) {
	if !ValidID(id) {
		return nil, r.invalid(id)
	}
	if err := os.MkdirAll(r.locks, 0o700); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create the locks directory")
	}
	path := r.lockPath(id)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot open the lock").With("path", path)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot lock the "+r.kind.Name).With("path", path)
		}
		if !wait {
			f.Close()
			return nil, ErrRunLocked
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(runLockPoll):
		}
	}
}

// Locked reports whether a process holds record id's lock now.
func (r *Records) Locked(id string) bool {
	if !ValidID(id) {
		return false
	}
	f, err := os.OpenFile(r.lockPath(id), os.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	return false
}
