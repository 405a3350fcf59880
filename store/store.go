// Package store keeps the records of every kind of run on disk, each kind
// in a directory of its own below one root (Kind): jobs exactly as seed
// 002 lays them out,
//
//	<dir>/runs/<job_id>/{request.json,status.json,result.json,stdout.txt,
//	                     stderr.txt,snapshot/,artifacts/}
//
// agent tasks in <dir>/tasks/<task_id>/ and capability runs in
// <dir>/agent-runs/<run_id>/. Every kind has one id rule (ValidID), one
// atomic claim that makes a repeated id idempotent or job.conflict by the
// request's digest (Records.Claim), and one retention (Records.Retain).
//
// Every file is replaced atomically (temp file, rename), so after any crash
// a record file is either absent, old or complete, whatever happens to the
// process. A result.json on disk is the truth; a status.json that disagrees
// with it is stale. With Durable set, result.json is also fsynced (file and
// directory) so it survives power loss; that costs about 2 ms per job on the
// project's machines, so it is an operator choice. Queued jobs are made
// durable by the queue that accepted them, not by request.json.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// Record file names.
const (
	RequestFile  = "request.json"
	StatusFile   = "status.json"
	ResultFile   = "result.json"
	StdoutFile   = "stdout.txt"
	StderrFile   = "stderr.txt"
	SnapshotDir  = "snapshot"
	ArtifactsDir = "artifacts"
)

// Store is a run store rooted at a directory.
type Store struct {
	dir string
	// Durable makes WriteResult fsync result.json and its directory.
	Durable bool
	// jobs are the job records, runs/<job_id>.
	jobs  *Records
	own   sync.Once
	owned bool
	close sync.Once
}

// Open creates the store layout under dir if needed. Any number of
// processes may open one store: ids are claimed atomically (Claim) and a
// run is locked by the process executing it (LockRun). The one that
// recovers and retains runs takes ownership (Own).
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "store directory is not usable")
	}
	if err := os.MkdirAll(filepath.Join(abs, "runs"), PrivateDirMode); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create store directory")
	}
	// Private to the runner's user: others may pass through (a sandbox's
	// uid reaches its workspace below), never list or read records.
	for _, d := range []string{abs, filepath.Join(abs, "runs")} {
		if err := restrict(d); err != nil {
			return nil, err
		}
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	jobs := &Records{kind: Jobs, dir: filepath.Join(abs, Jobs.Dir), locks: filepath.Join(abs, RunLocksDir)}
	return &Store{dir: abs, jobs: jobs}, nil
}

// Close releases this Store's hold of the owner lock, if it took one;
// later calls do nothing.
func (s *Store) Close() error {
	s.close.Do(func() {
		if s.owned {
			release(s.dir)
		}
	})
	return nil
}

// Dir is the absolute store root.
func (s *Store) Dir() string { return s.dir }

// RunDir is the record directory of a job.
func (s *Store) RunDir(id string) string { return s.jobs.Path(id) }

// Create makes the run directory of a new job.
func (s *Store) Create(id string) error {
	if !ValidJobID(id) {
		return job.Errorf(job.CodeInvalidRequest, "job_id %q is not a valid id", id)
	}
	if err := os.MkdirAll(s.RunDir(id), PrivateDirMode); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot create run directory")
	}
	return nil
}

// Exists reports whether a record directory exists for id.
func (s *Store) Exists(id string) bool { return s.jobs.Exists(id) }

// Remove deletes a job's record entirely (used when a submit is rolled
// back, and by retention).
func (s *Store) Remove(id string) error { return s.jobs.Remove(id) }

// StatusRecord is the content of status.json.
type StatusRecord struct {
	JobID     string     `json:"job_id"`
	Status    job.Status `json:"status"`
	UpdatedAt time.Time  `json:"updated_at"`
	Attempt   int        `json:"attempt,omitempty"`
	Backend   string     `json:"backend,omitempty"`
	Error     *job.Error `json:"error,omitempty"`
}

// WriteRequest stores the normalized request (not fsynced).
func (s *Store) WriteRequest(req job.Request) error {
	return s.writeJSON(req.JobID, RequestFile, req, false)
}

// WriteStatus stores status.json (not fsynced; result.json wins).
func (s *Store) WriteStatus(rec StatusRecord) error {
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = time.Now().UTC()
	}
	return s.writeJSON(rec.JobID, StatusFile, rec, false)
}

// WriteResult stores result.json (fsynced when s.Durable).
func (s *Store) WriteResult(res job.Result) error {
	return s.writeJSON(res.JobID, ResultFile, res, s.Durable)
}

// ReadRequest loads request.json.
func (s *Store) ReadRequest(id string) (job.Request, error) {
	var req job.Request
	err := s.readJSON(id, RequestFile, &req)
	return req, err
}

// ReadStatus loads status.json.
func (s *Store) ReadStatus(id string) (StatusRecord, error) {
	var rec StatusRecord
	err := s.readJSON(id, StatusFile, &rec)
	return rec, err
}

// ReadResult loads result.json.
func (s *Store) ReadResult(id string) (job.Result, error) {
	var res job.Result
	err := s.readJSON(id, ResultFile, &res)
	return res, err
}

// List returns the ids of all stored runs, sorted.
func (s *Store) List() ([]string, error) { return s.jobs.List() }

func (s *Store) writeJSON(id, name string, v any, durable bool) error {
	if !ValidJobID(id) {
		return job.Errorf(job.CodeInvalidRequest, "job_id %q is not a valid id", id)
	}
	b, err := job.MarshalIndent(v)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot encode "+name)
	}
	return writeFile(filepath.Join(s.RunDir(id), name), b, RecordFileMode, durable)
}

func (s *Store) readJSON(id, name string, v any) error {
	if !ValidJobID(id) {
		return job.Errorf(job.CodeJobNotFound, "job %q not found", id)
	}
	b, err := os.ReadFile(filepath.Join(s.RunDir(id), name))
	if errors.Is(err, fs.ErrNotExist) {
		return job.Errorf(job.CodeJobNotFound, "job %q has no %s", id, name).With("job_id", id)
	}
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot read "+name)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return job.Wrap(job.CodeRunIOFailed, fmt.Errorf("%s: %w", name, err), "corrupt run record")
	}
	return nil
}
