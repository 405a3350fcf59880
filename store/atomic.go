package store

import (
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/job"
)

// WriteFileAtomic writes data to path through a temp file in the same
// directory, fsyncs it and renames it into place, then fsyncs the directory.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
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
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write "+filepath.Base(path))
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write "+filepath.Base(path))
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
