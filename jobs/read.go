package jobs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// MaxLongPoll bounds Get's wait.
const MaxLongPoll = 25 * time.Second

// Status is a job before it is terminal.
type Status struct {
	JobID     string     `json:"job_id"`
	Status    job.Status `json:"status"`
	Attempt   int        `json:"attempt,omitempty"`
	Backend   string     `json:"backend,omitempty"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// View is a job as it stands: its status, and its result once terminal.
type View struct {
	Status Status
	Result *job.Result
}

func notFound(id string) error {
	return job.Errorf(job.CodeJobNotFound, "job not found").With("job_id", id)
}

func statusOf(id string, rec store.StatusRecord) Status {
	return Status{JobID: id, Status: rec.Status, Attempt: rec.Attempt, Backend: rec.Backend, UpdatedAt: rec.UpdatedAt}
}

// Get returns job id as it stands. With wait > 0 it first waits (at most
// MaxLongPoll) for the job to be terminal.
func (s *Service) Get(ctx context.Context, id string, wait time.Duration) (View, error) {
	if wait < 0 || wait > MaxLongPoll {
		return View{}, job.Errorf(job.CodeInvalidRequest, "wait must be a duration up to %s", MaxLongPoll)
	}
	st := s.Store()
	if wait > 0 {
		if _, err := st.ReadStatus(id); err == nil {
			wctx, cancel := context.WithTimeout(ctx, wait)
			_ = s.waitTerminal(wctx, id, func() bool { return s.finished(id) })
			cancel()
		}
	}
	if res, err := st.ReadResult(id); err == nil {
		return View{Status: Status{JobID: id, Status: res.Status, Attempt: res.Attempt, Backend: res.Backend, UpdatedAt: res.EndedAt}, Result: &res}, nil
	}
	rec, err := st.ReadStatus(id)
	if err != nil {
		return View{}, notFound(id)
	}
	return View{Status: statusOf(id, rec)}, nil
}

func (s *Service) finished(id string) bool {
	_, err := s.Store().ReadResult(id)
	return err == nil
}

// Wait blocks until job id is terminal and returns its result (job.not_found
// for an unknown id; ctx's error when it ends first).
func (s *Service) Wait(ctx context.Context, id string) (job.Result, error) {
	st := s.Store()
	if _, err := st.ReadStatus(id); err != nil {
		return job.Result{}, notFound(id)
	}
	var res job.Result
	done := func() bool {
		var err error
		res, err = st.ReadResult(id)
		return err == nil
	}
	for !done() {
		// waitTerminal returns on the terminal event; the loop re-reads
		// the record, which the worker writes before publishing (and the
		// periodic re-read covers a record that arrives without an event,
		// as a remote worker's does).
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.waitTerminal(wctx, id, done)
		cancel()
		if ctx.Err() != nil {
			return job.Result{}, ctx.Err()
		}
		if err != nil && wctx.Err() == nil {
			return job.Result{}, err
		}
	}
	return res, nil
}

// Filter selects jobs for List.
type Filter struct {
	// Statuses, when non-empty, are the statuses listed.
	Statuses []job.Status
	// Trace maps trace keys to the values a job's trace must hold.
	Trace map[string]string
	// After is the paging cursor: only ids after it are listed.
	After string
	// Limit is the page size, 1..MaxListLimit (0 takes DefaultListLimit).
	Limit int
}

// List page sizes.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Page is one page of List.
type Page struct {
	Jobs       []Status `json:"jobs"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// List pages through jobs in id order (ids are time-ordered UUIDv7s).
func (s *Service) List(_ context.Context, f Filter) (Page, error) {
	if f.Limit == 0 {
		f.Limit = DefaultListLimit
	}
	if f.Limit < 1 || f.Limit > MaxListLimit {
		return Page{}, job.Errorf(job.CodeInvalidRequest, "limit must be between 1 and %d", MaxListLimit)
	}
	for _, v := range f.Statuses {
		if !v.Valid() {
			return Page{}, job.Errorf(job.CodeInvalidRequest, "unknown status %q", v)
		}
	}
	st := s.Store()
	ids, err := st.List()
	if err != nil {
		return Page{}, err
	}
	out := Page{Jobs: []Status{}}
	for _, id := range ids {
		if f.After != "" && id <= f.After {
			continue
		}
		rec, err := st.ReadStatus(id)
		if err != nil || (len(f.Statuses) > 0 && !slices.Contains(f.Statuses, rec.Status)) {
			continue
		}
		if len(f.Trace) > 0 && !s.traceMatches(id, f.Trace) {
			continue
		}
		if len(out.Jobs) == f.Limit {
			out.NextCursor = out.Jobs[len(out.Jobs)-1].JobID
			break
		}
		out.Jobs = append(out.Jobs, statusOf(id, rec))
	}
	return out, nil
}

func (s *Service) traceMatches(id string, want map[string]string) bool {
	req, err := s.Store().ReadRequest(id)
	if err != nil {
		return false
	}
	for k, v := range want {
		if req.Trace.String(k) != v {
			return false
		}
	}
	return true
}

// Request returns the request job id was submitted with.
func (s *Service) Request(id string) (job.Request, error) {
	req, err := s.Store().ReadRequest(id)
	if err != nil {
		return job.Request{}, notFound(id)
	}
	return req, nil
}

// Terminal returns the result of a finished job, job.not_terminal for a
// queued or running one, job.not_found otherwise.
func (s *Service) Terminal(id string) (job.Result, error) {
	st := s.Store()
	res, err := st.ReadResult(id)
	if err == nil {
		return res, nil
	}
	if _, err := st.ReadStatus(id); err == nil {
		return job.Result{}, job.Errorf(job.CodeNotTerminal, "job has not finished").With("job_id", id)
	}
	return job.Result{}, notFound(id)
}

// Artifacts lists a finished job's artifacts.
func (s *Service) Artifacts(id string) ([]job.Artifact, error) {
	res, err := s.Terminal(id)
	if err != nil {
		return nil, err
	}
	if res.Artifacts == nil {
		return []job.Artifact{}, nil
	}
	return res.Artifacts, nil
}

// OpenArtifact opens one recorded artifact of a finished job. The path is
// looked up in the job's artifact list, never used as a filesystem path
// directly, and opened beneath the run's artifacts directory. The caller
// closes the file.
func (s *Service) OpenArtifact(id, path string) (*os.File, job.Artifact, time.Time, error) {
	res, err := s.Terminal(id)
	if err != nil {
		return nil, job.Artifact{}, time.Time{}, err
	}
	for _, a := range res.Artifacts {
		if a.Path != path {
			continue
		}
		root, err := os.OpenRoot(filepath.Join(s.Store().RunDir(id), store.ArtifactsDir))
		if err != nil {
			return nil, a, res.EndedAt, job.Wrap(job.CodeRunIOFailed, err, "artifact storage is unreadable")
		}
		defer root.Close()
		f, err := root.Open(filepath.FromSlash(a.Path))
		if err != nil {
			return nil, a, res.EndedAt, job.Wrap(job.CodeRunIOFailed, err, "artifact file is missing")
		}
		return f, a, res.EndedAt, nil
	}
	return nil, job.Artifact{}, time.Time{}, job.Errorf(job.CodeJobNotFound, "no such artifact").With("job_id", id).With("path", path)
}
