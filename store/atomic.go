package store

import (
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/job"
)

// WriteFileAtomic writes data to path through a temp file in the same
// directory, fsyncs it and renames it into place, then fsyncs the directory:
// after a crash the file is either the old one or the complete new one, and
// once this returns it survives power loss.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFile(path, data, perm, true)
}

// WriteFileReplace is WriteFileAtomic without the fsyncs: readers and a
// process crash still see the old or the complete new file (rename is
// atomic), but a power loss may lose the update. Used for records that a
// later durable write supersedes (status.json, stdout.txt).
func WriteFileReplace(path string, data []byte, perm os.FileMode) error {
	return writeFile(path, data, perm, false)
}

// beforeRename, set by tests only, runs between an atomic write's (or a
// claim's) complete temp file or staging directory and its rename: where
// a crash leaves the temp behind and the old state in place.
var beforeRename func(tmp string)

func writeFile(path string, data []byte, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write "+filepath.Base(path))
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write "+filepath.Base(path))
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write "+filepath.Base(path))
	}
	if beforeRename != nil {
		beforeRename(tmp)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write "+filepath.Base(path))
	}
	if !durable {
		return nil
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// WriteFileOnce writes a file that is created once and never replaced,
// and whose readers only look at it after a later commit record exists
// (stdout.txt and stderr.txt are read only once result.json is there). It
// skips the temp file and rename.
func WriteFileOnce(path string, data []byte, perm os.FileMode) error {
	if err := os.WriteFile(path, data, perm); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write "+filepath.Base(path))
	}
	return nil
}
