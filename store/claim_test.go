package store

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// TestConcurrentClaims: of 200 concurrent claims of one id with one
// request exactly one creates the record and none is a conflict; a
// different request is one.
func TestConcurrentClaims(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := job.Request{JobID: "job_same", Command: job.Command{Argv: []string{"echo", "hi"}}}
	const n = 200
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		errs    []error
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.Claim(req, StatusRecord{JobID: req.JobID, Status: job.StatusQueued})
			mu.Lock()
			defer mu.Unlock()
			if ok {
				created++
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if created != 1 || len(errs) != 0 {
		t.Errorf("%d claims created the record, %d failed (first: %v); want 1 and 0", created, len(errs), first(errs))
	}
	entries, _ := os.ReadDir(filepath.Join(s.Dir(), "runs"))
	if len(entries) != 1 || entries[0].Name() != req.JobID {
		t.Errorf("runs/ holds %v, want only %s", entries, req.JobID)
	}
	got, err := s.ReadRequest(req.JobID)
	if err != nil || job.RequestSHA256(got) != job.RequestSHA256(req) {
		t.Errorf("stored request = %+v, %v", got, err)
	}
	if rec, err := s.ReadStatus(req.JobID); err != nil || rec.Status != job.StatusQueued {
		t.Errorf("stored status = %+v, %v; want queued", rec, err)
	}

	other := req
	other.Command.Argv = []string{"echo", "other"}
	if ok, err := s.Claim(other, StatusRecord{}); ok || job.CodeOf(err) != job.CodeJobConflict {
		t.Errorf("claim with a different request = %v, %v; want false, %s", ok, err, job.CodeJobConflict)
	}
	if _, err := s.Claim(job.Request{JobID: "../x"}, StatusRecord{}); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("claim of an invalid id = %v, want %s", err, job.CodeInvalidRequest)
	}
}

func first(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}
