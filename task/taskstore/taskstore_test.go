package taskstore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
)

// seed writes a task directory directly in the given state.
func seed(t *testing.T, root, id string, st state.State, checkpoint time.Time) {
	t.Helper()
	dir := filepath.Join(root, id)
	if _, err := state.Create(dir, id, ""); err != nil {
		t.Fatal(err)
	}
	rec := state.Record{TaskID: id, State: st, CreatedAt: checkpoint, LastCheckpoint: checkpoint}
	b, _ := json.Marshal(rec)
	os.WriteFile(filepath.Join(dir, state.StateFile), b, 0o644)
}

func TestRecoverLeavesNothingActive(t *testing.T) {
	root := t.TempDir()
	s, _ := New(root, lifecycle.Config{Backend: localprocess.Backend{}})
	now := time.Now()
	for _, st := range state.All {
		seed(t, root, "t-"+string(st), st, now)
	}
	// A pending task with a broken manifest cannot restart: it fails with a reason.
	os.WriteFile(filepath.Join(root, "t-pending", "manifest.yaml"), []byte("not: [a task"), 0o644)
	acted, err := s.Recover()
	if err != nil {
		t.Fatal(err)
	}
	s.Wait()
	if len(acted) != 6 {
		t.Errorf("acted on %v, want the 6 active tasks", acted)
	}
	for _, st := range state.All {
		m, err := state.Open(filepath.Join(root, "t-"+string(st)))
		if err != nil {
			t.Fatal(err)
		}
		rec := m.Current()
		if !rec.State.Terminal() {
			t.Errorf("%s is still %s after recovery", st, rec.State)
		}
		if !st.Terminal() && (rec.Error == nil || rec.Error.Code != job.CodeRunInterrupted) {
			t.Errorf("%s: recovery recorded no reason: %+v", st, rec)
		}
		if st.Terminal() && rec.State != st {
			t.Errorf("terminal %s changed to %s", st, rec.State)
		}
	}
	m, _ := state.Open(filepath.Join(root, "t-running"))
	if !strings.Contains(m.Current().Reason, "during running") {
		t.Errorf("running task reason = %q", m.Current().Reason)
	}
}

func TestRetentionBoundaries(t *testing.T) {
	root := t.TempDir()
	s, _ := New(root, lifecycle.Config{})
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	cases := []struct {
		id      string
		st      state.State
		age     time.Duration
		removed bool
	}{
		{"done-6d", state.Completed, 6 * day, false},
		{"done-7d-plus", state.Completed, 7*day + time.Second, true},
		{"failed-13d", state.Failed, 13 * day, false},
		{"failed-15d", state.Failed, 15 * day, true},
		{"preserved-15d", state.FailedPreserved, 15 * day, true},
		{"cancelled-2d", state.Cancelled, 2 * day, false},
		{"cancelled-4d", state.Cancelled, 4 * day, true},
		{"running-30d", state.Running, 30 * day, false},
	}
	for _, c := range cases {
		seed(t, root, c.id, c.st, now.Add(-c.age))
	}
	removed := map[string]bool{}
	for _, id := range s.Retain(now) {
		removed[id] = true
	}
	for _, c := range cases {
		if removed[c.id] != c.removed {
			t.Errorf("%s (%s, %v old): removed = %v, want %v", c.id, c.st, c.age, removed[c.id], c.removed)
		}
		if _, err := os.Stat(filepath.Join(root, c.id)); (err == nil) == c.removed {
			t.Errorf("%s: directory presence wrong", c.id)
		}
	}
}

func TestSubmitRejectsDuplicatesAndBadManifests(t *testing.T) {
	s, _ := New(t.TempDir(), lifecycle.Config{})
	if _, err := s.Submit([]byte("kind: Task")); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("bad manifest = %v", err)
	}
	if err := s.Cancel("nope"); job.CodeOf(err) != job.CodeJobNotFound {
		t.Errorf("cancel unknown = %v", err)
	}
}
