package store

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// Claim creates the record of a new job atomically: request.json and
// status.json (rec) are written into a staging directory that is then
// renamed to runs/<job_id>, so the run directory never exists without its
// request. It reports whether this call created the record. When the id
// is taken, the stored request decides: the same request (by
// job.RequestSHA256) is (false, nil), a different or missing one is
// job.conflict.
func (s *Store) Claim(req job.Request, rec StatusRecord) (bool, error) {
	if !ValidJobID(req.JobID) {
		return false, job.Errorf(job.CodeInvalidRequest, "job_id %q is not a valid id", req.JobID)
	}
	if s.Exists(req.JobID) {
		return false, s.sameRequest(req)
	}
	// The staging name starts with "." so it is never a job id (List).
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "runs"), ".claim-")
	if err != nil {
		return false, job.Wrap(job.CodeRunIOFailed, err, "cannot create run directory")
	}
	defer os.RemoveAll(tmp) // gone after a successful rename
	if err := os.Chmod(tmp, PrivateDirMode); err != nil {
		return false, job.Wrap(job.CodeRunIOFailed, err, "cannot create run directory")
	}
	b, err := job.MarshalIndent(req)
	if err != nil {
		return false, job.Wrap(job.CodeRunIOFailed, err, "cannot encode "+RequestFile)
	}
	if err := writeFile(filepath.Join(tmp, RequestFile), b, RecordFileMode, false); err != nil {
		return false, err
	}
	if rec.JobID != "" {
		if rec.UpdatedAt.IsZero() {
			rec.UpdatedAt = time.Now().UTC()
		}
		b, err := job.MarshalIndent(rec)
		if err != nil {
			return false, job.Wrap(job.CodeRunIOFailed, err, "cannot encode "+StatusFile)
		}
		if err := writeFile(filepath.Join(tmp, StatusFile), b, RecordFileMode, false); err != nil {
			return false, err
		}
	}
	// rename(2) of a directory onto an existing non-empty one fails, so
	// of concurrent claims exactly one wins.
	err = os.Rename(tmp, s.RunDir(req.JobID))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) {
		return false, s.sameRequest(req)
	}
	return false, job.Wrap(job.CodeRunIOFailed, err, "cannot create run directory")
}

// sameRequest is nil when the stored request of req.JobID is req, and
// job.conflict otherwise.
func (s *Store) sameRequest(req job.Request) error {
	prev, err := s.ReadRequest(req.JobID)
	if err != nil || job.RequestSHA256(prev) != job.RequestSHA256(req) {
		return job.Errorf(job.CodeJobConflict, "job_id already used by a different request").With("job_id", req.JobID)
	}
	return nil
}
