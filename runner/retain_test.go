package runner_test

import (
	"slices"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
)

// TestRetainRuns: a terminal run older than the run retention is removed;
// a young terminal run and an old run that is not terminal are kept, and
// a job after retention still runs.
func TestRetainRuns(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "alpha\n"})
	now := time.Now()
	old := f.run(f.request([]string{"cat", "a.txt"}, "cat"))
	young := f.run(f.request([]string{"cat", "a.txt"}, "cat"))
	st := f.r.Store()
	if err := st.WriteStatus(store.StatusRecord{JobID: old.JobID, Status: job.StatusCompleted, UpdatedAt: now.Add(-8 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	const stuck = "job_still_running"
	if err := st.Create(stuck); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteStatus(store.StatusRecord{JobID: stuck, Status: job.StatusRunning, UpdatedAt: now.Add(-30 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	removed, err := f.r.Retain(now, runner.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removed, []string{old.JobID}; !slices.Equal(got, want) {
		t.Errorf("Retain removed %v, want %v", got, want)
	}
	for id, want := range map[string]bool{old.JobID: false, young.JobID: true, stuck: true} {
		if got := st.Exists(id); got != want {
			t.Errorf("run %s exists = %v after retention, want %v", id, got, want)
		}
	}
	if res := f.run(f.request([]string{"cat", "a.txt"}, "cat")); res.Status != job.StatusCompleted {
		t.Errorf("job after retention: status %q (%+v), want completed", res.Status, res.Error)
	}
}
