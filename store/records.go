package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/agent-runner/agent-runner/job"
)

// Records is the directory of one kind's records, <dir>/<id>/, each
// created by an atomic claim, written through atomic replacements and
// removed whole by Remove or Retain. Any number of processes may use one
// directory at once: claims and removals are renames, and a record in
// progress is held by a lock file (Lock) its process keeps open.
type Records struct {
	kind Kind
	dir  string
	// locks holds one lock file per record in progress; jobs keep theirs
	// in <store>/locks (RunLocksDir), beside runs/, so a run directory
	// stays seed 002's layout; other kinds in <dir>/.locks.
	locks string
}

// Names the store gives its own entries in a kind's directory; each
// starts with "." so it is never an id (ValidID).
const (
	claimPrefix = ".claim-"
	trashPrefix = ".trash-"
	kindLocks   = ".locks"
)

// OpenRecords opens (creating if needed, private to the runner's user)
// the directory of k's records at dir. A kind's service uses it when it
// is given its own directory; Store.Records opens <store>/<k.Dir>.
func OpenRecords(dir string, k Kind) (*Records, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "the "+k.Name+" records directory is not usable")
	}
	if err := os.MkdirAll(abs, PrivateDirMode); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create the "+k.Name+" records directory").With("dir", abs)
	}
	if err := restrict(abs); err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return &Records{kind: k, dir: abs, locks: filepath.Join(abs, kindLocks)}, nil
}

// Records opens the directory of k's records below the store root.
func (s *Store) Records(k Kind) (*Records, error) {
	if k.Dir == Jobs.Dir {
		return s.jobs, nil
	}
	return OpenRecords(filepath.Join(s.dir, k.Dir), k)
}

// Kind is the kind of record kept here.
func (r *Records) Kind() Kind { return r.kind }

// Dir is the absolute directory of the records.
func (r *Records) Dir() string { return r.dir }

// Path is record id's directory (id unchecked: callers check ValidID
// first, or hold an id the store gave them).
func (r *Records) Path(id string) string { return filepath.Join(r.dir, id) }

// Exists reports whether record id exists (a directory; a symlink in its
// place is not a record).
func (r *Records) Exists(id string) bool {
	if !ValidID(id) {
		return false
	}
	fi, err := os.Lstat(r.Path(id))
	return err == nil && fi.IsDir()
}

// List returns the ids of the records, sorted; the store's own entries
// (claims being made, records being removed, locks) are not ids.
func (r *Records) List() ([]string, error) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot list "+r.kind.Name+" records")
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() && ValidID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// WriteFile atomically replaces file name in record id (0600): readers
// see the old or the complete new file. durable also fsyncs the file and
// the directory, so the write survives power loss.
func (r *Records) WriteFile(id, name string, data []byte, durable bool) error {
	if !ValidID(id) {
		return r.invalid(id)
	}
	return writeFile(filepath.Join(r.Path(id), name), data, RecordFileMode, durable)
}

// Remove deletes record id whole: it is renamed out of the way first, so
// no reader or claim ever meets a half-removed record, and its lock file
// goes with it. Removing a record that does not exist does nothing.
func (r *Records) Remove(id string) error {
	if !ValidID(id) {
		return nil
	}
	if err := os.Remove(r.lockPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot remove the lock of a "+r.kind.Name)
	}
	if fi, err := os.Lstat(r.Path(id)); err == nil && !fi.IsDir() {
		// Not a record (a link or file in its place): unlinked, never
		// followed.
		if err := os.Remove(r.Path(id)); err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "cannot remove a "+r.kind.Name).With(r.kind.IDField, id)
		}
		return nil
	}
	trash, err := os.MkdirTemp(r.dir, trashPrefix)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot remove a "+r.kind.Name)
	}
	// rename(2) of a directory onto an empty one replaces it (os.Rename
	// refuses any existing directory).
	if err := syscall.Rename(r.Path(id), trash); err != nil {
		os.Remove(trash)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return job.Wrap(job.CodeRunIOFailed, err, "cannot remove a "+r.kind.Name).With(r.kind.IDField, id)
	}
	if err := os.RemoveAll(trash); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot remove a "+r.kind.Name).With(r.kind.IDField, id)
	}
	return nil
}

// invalid is the error for an id that breaks the id rule.
func (r *Records) invalid(id string) error {
	return job.Errorf(job.CodeInvalidRequest, "%s %q is not a valid id", r.kind.IDField, id).With("field", r.kind.IDField)
}

// readJSONFile decodes dir/name into v: job.not_found when it is absent,
// run.io_failed when it cannot be read or decoded.
func readJSONFile(dir, name string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return job.Errorf(job.CodeJobNotFound, "%s has no %s", filepath.Base(dir), name)
	}
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot read "+name)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return job.Wrap(job.CodeRunIOFailed, fmt.Errorf("%s: %w", name, err), "corrupt record")
	}
	return nil
}
