package store

import (
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

// LockFile is the store's ownership lock, <dir>/.lock. A process holds a
// flock on it from the first Open of the store to the last Close (or its
// exit); its content names the owner for the error a refused process
// prints.
const LockFile = ".lock"

// Owner is the content of the lock file.
type Owner struct {
	PID      int       `json:"pid"`
	Hostname string    `json:"hostname"`
	Command  string    `json:"command"`
	Since    time.Time `json:"since"`
	Shared   bool      `json:"shared,omitempty"`
}

// processLock is one process's hold on a store's lock file. flock locks
// belong to an open file, so a second open of the same file in the same
// process would refuse the first; every Open in this process therefore
// shares one hold, counted, and the flock goes with the last Close.
type processLock struct {
	f    *os.File
	refs int
}

var (
	locksMu sync.Mutex
	locks   = map[string]*processLock{}
)

// acquire takes (or shares, within this process) the lock of the store at
// dir: exclusive, or shared with other processes that ask for shared. A
// lock held the other way by another process is job.conflict naming it.
func acquire(dir string, shared bool) error {
	locksMu.Lock()
	defer locksMu.Unlock()
	if l := locks[dir]; l != nil {
		l.refs++
		return nil
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot open the store lock").With("path", path)
	}
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return inUse(dir, path)
		}
		return job.Wrap(job.CodeRunIOFailed, err, "cannot lock the store").With("path", path)
	}
	host, _ := os.Hostname()
	b, _ := json.Marshal(Owner{PID: os.Getpid(), Hostname: host, Command: strings.Join(os.Args, " "), Since: time.Now().UTC(), Shared: shared})
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(append(b, '\n'), 0)
	}
	locks[dir] = &processLock{f: f, refs: 1}
	return nil
}

// inUse is the error for a store another process holds: job.conflict with
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
		return job.Errorf(job.CodeJobConflict, "store %s is in use by another process (see %s)", dir, path).With("store_dir", dir)
	}
	return job.Errorf(job.CodeJobConflict, "store %s is in use by %s", dir, o).
		With("store_dir", dir).With("pid", o.PID).With("hostname", o.Hostname).
		With("command", o.Command).With("since", o.Since).With("shared", o.Shared)
}

// release drops one hold of the lock of the store at dir.
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
