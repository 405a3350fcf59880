package taskstore

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestObserverHearsPendingWithItsManifest: when the observer hears a task
// enter pending, its manifest is on disk, so a reader that follows the
// state events (GET /v1/events, the dashboard's tasks list) finds its
// name and labels at once.
func TestObserverHearsPendingWithItsManifest(t *testing.T) {
	origin := tasktest.Origin(t, map[string]string{"a.txt": "one\n"})
	var mu sync.Mutex
	var heard []string
	s, err := New(t.TempDir(), lifecycle.Config{Backend: localprocess.Backend{}})
	if err != nil {
		t.Fatal(err)
	}
	s.Lifecycle.Observer = func(from state.State, rec state.Record) {
		if rec.State != state.Pending {
			return
		}
		_, err := os.Stat(filepath.Join(s.Dir(rec.TaskID), "manifest.yaml"))
		mu.Lock()
		heard = append(heard, rec.TaskID+" manifest present: "+map[bool]string{true: "yes", false: "no"}[err == nil])
		mu.Unlock()
	}
	s.Queue = openQueue(t, 4) // the task stays pending in the queue
	if _, err := s.Submit(agentDoc("observed-1", origin)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "observed-1 manifest present: yes"; len(heard) != 1 || heard[0] != want {
		t.Errorf("observer heard %q, want [%q]", heard, want)
	}
}
