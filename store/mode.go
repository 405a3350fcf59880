package store

import (
	"os"

	"github.com/agent-runner/agent-runner/job"
)

// The store is private to the runner's user: record files are read and
// written by it alone (request.json holds env values, stdout.txt whatever
// a job printed), and its directories let others pass through but not
// list them, because a sandbox's uid must reach its workspace (the
// snapshot) below them.
const (
	RecordFileMode os.FileMode = 0o600
	PrivateDirMode os.FileMode = 0o711
)

// restrict takes group and other read and write off a store directory
// created by an earlier version (0755), keeping search.
func restrict(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot read the store directory")
	}
	if fi.Mode().Perm()&0o066 == 0 {
		return nil
	}
	if err := os.Chmod(dir, fi.Mode().Perm()&^0o066); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot make the store directory private").With("dir", dir)
	}
	return nil
}
