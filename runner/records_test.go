package runner_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
)

// TestExecuteKeepsAFinishedRecord: Execute of an id that has result.json
// (a redelivery, a repeated call) returns the stored result and leaves
// the record byte-identical.
func TestExecuteKeepsAFinishedRecord(t *testing.T) {
	f := newFixture(t, nil)
	req := f.request([]string{"echo", "once"}, "echo")
	req.JobID = "job_finished-1"
	first := f.run(req)
	dir := filepath.Join(f.store, "runs", req.JobID)
	before := readFiles(t, dir)

	again := f.r.Execute(context.Background(), req, runner.Options{Attempt: 2})
	if again.StartedAt != first.StartedAt || again.Attempt != first.Attempt {
		t.Errorf("Execute of a finished id = attempt %d started %v, want the stored attempt %d started %v",
			again.Attempt, again.StartedAt, first.Attempt, first.StartedAt)
	}
	after := readFiles(t, dir)
	for name, b := range before {
		if !bytes.Equal(after[name], b) {
			t.Errorf("%s changed:\n got %q\nwant %q", name, after[name], b)
		}
	}
	if len(after) != len(before) {
		t.Errorf("record files = %d, want %d", len(after), len(before))
	}
}

// TestConcurrentRunsOfOneID: identical concurrent Runs of one id run it
// once; every caller gets that result and none a conflict.
func TestConcurrentRunsOfOneID(t *testing.T) {
	f := newFixture(t, nil)
	req := f.request([]string{"sleep", "0.2"}, "sleep")
	req.JobID = "job_concurrent-1"
	const n = 20
	results := make([]job.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = f.r.Run(context.Background(), req, runner.Options{Attempt: 1})
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || results[i].Status != job.StatusCompleted || results[i].StartedAt != results[0].StartedAt {
			t.Errorf("run %d = %s %v (started %v), err %v; want completed, one attempt",
				i, results[i].Status, results[i].Error, results[i].StartedAt, errs[i])
		}
	}
	entries, _ := os.ReadDir(filepath.Join(f.store, "runs"))
	if len(entries) != 1 {
		t.Errorf("runs/ holds %d entries, want 1", len(entries))
	}
}

func readFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, name := range []string{store.RequestFile, store.StatusFile, store.ResultFile, store.StdoutFile, store.StderrFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	return files
}
