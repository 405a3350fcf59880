package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// Claim creates record id atomically: write fills a staging directory
// (beside the records, named so it is never an id) with the record's
// first files, the claim adds the request's digest (DigestFile; jobs
// keep theirs in request.json), and the directory is renamed to <id>.
// rename(2) of a directory onto an existing non-empty one fails, so of
// concurrent claims of one id, in any number of processes sharing the
// directory, exactly one creates the record, and the record never exists
// without its first files. It reports whether this call created the
// record. When the id is taken the stored digest decides: the same
// digest is (false, nil), the claim repeated and nothing changed; a
// different or missing one is job.conflict.
func (r *Records) Claim(id, digest string, write func(dir string) error) (bool, error) {
	if !ValidID(id) {
		return false, r.invalid(id)
	}
	if r.Exists(id) {
		return false, r.same(id, digest)
	}
	tmp, err := os.MkdirTemp(r.dir, claimPrefix)
	if err != nil {
		return false, job.Wrap(job.CodeRunIOFailed, err, "cannot create the "+r.kind.Name+" record")
	}
	defer os.RemoveAll(tmp) // gone after a successful rename
	if err := os.Chmod(tmp, PrivateDirMode); err != nil {
		return false, job.Wrap(job.CodeRunIOFailed, err, "cannot create the "+r.kind.Name+" record")
	}
	if err := write(tmp); err != nil {
		return false, err
	}
	if r.kind.requestDigest == nil {
		if err := writeFile(filepath.Join(tmp, DigestFile), []byte(digest+"\n"), RecordFileMode, false); err != nil {
			return false, err
		}
	}
	if beforeRename != nil {
		beforeRename(tmp)
	}
	err = os.Rename(tmp, r.Path(id))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) {
		return false, r.same(id, digest)
	}
	return false, job.Wrap(job.CodeRunIOFailed, err, "cannot create the "+r.kind.Name+" record")
}

// same is nil when record id was claimed with digest, and job.conflict
// otherwise: the same error, and so the same answer at every door
// (409), that a job id used by a different request gets.
func (r *Records) same(id, digest string) error {
	stored, err := r.Digest(id)
	if err != nil || stored != digest {
		return job.Errorf(job.CodeJobConflict, "%s already used by a different request", r.kind.IDField).With(r.kind.IDField, id)
	}
	return nil
}

// Digest returns the digest of the request record id was claimed with.
func (r *Records) Digest(id string) (string, error) {
	if r.kind.requestDigest != nil {
		return r.kind.requestDigest(r.Path(id))
	}
	b, err := os.ReadFile(filepath.Join(r.Path(id), DigestFile))
	if err != nil {
		return "", job.Wrap(job.CodeRunIOFailed, err, "cannot read the request digest").With(r.kind.IDField, id)
	}
	return strings.TrimSpace(string(b)), nil
}

// Claim creates the record of a new job atomically (Records.Claim):
// request.json and, when rec names the job, status.json. When the id is
// taken, the stored request decides: the same request (by
// job.RequestSHA256) is (false, nil), a different or missing one is
// job.conflict.
func (s *Store) Claim(req job.Request, rec StatusRecord) (bool, error) {
	return s.jobs.Claim(req.JobID, job.RequestSHA256(req), func(dir string) error {
		b, err := job.MarshalIndent(req)
		if err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "cannot encode "+RequestFile)
		}
		if err := writeFile(filepath.Join(dir, RequestFile), b, RecordFileMode, false); err != nil {
			return err
		}
		if rec.JobID == "" {
			return nil
		}
		if rec.UpdatedAt.IsZero() {
			rec.UpdatedAt = time.Now().UTC()
		}
		b, err = job.MarshalIndent(rec)
		if err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "cannot encode "+StatusFile)
		}
		return writeFile(filepath.Join(dir, StatusFile), b, RecordFileMode, false)
	})
}
