package taskstore

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
)

const (
	taskDoc  = "version: \"1\"\nkind: Task\nmetadata: {id: same-id, name: n}\nrepository: {url: /nowhere, branch: main}\nclaude: {prompt: p}\n"
	otherDoc = "version: \"1\"\nkind: Task\nmetadata: {id: same-id, name: n}\nrepository: {url: /nowhere, branch: main}\nclaude: {prompt: another prompt}\n"
	// sameAsJSON is taskDoc written as JSON: the same manifest.
	sameAsJSON = `{"version": "1", "kind": "Task", "metadata": {"id": "same-id", "name": "n"}, "repository": {"url": "/nowhere", "branch": "main"}, "claude": {"prompt": "p"}}`
)

// TestRepeatedTaskID: a task id taken is job.conflict (409) whatever the
// repeat carries; details say whether it carried the same manifest (in
// any encoding), and neither repeat changes the stored task or queues it
// again.
func TestRepeatedTaskID(t *testing.T) {
	s, err := New(t.TempDir(), lifecycle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	q := &countingQueue{}
	s.Queue = q
	if _, err := s.Submit([]byte(taskDoc)); err != nil {
		t.Fatal(err)
	}
	stored, _ := os.ReadFile(filepath.Join(s.Dir("same-id"), "manifest.yaml"))
	tests := []struct {
		name, doc string
		same      bool
	}{
		{"the same manifest", taskDoc, true},
		{"the same manifest as JSON", sameAsJSON, true},
		{"another manifest", otherDoc, false},
	}
	for _, tt := range tests {
		_, err := s.Submit([]byte(tt.doc))
		je := job.AsError(err)
		if je == nil || je.Code != job.CodeJobConflict || je.Details["task_id"] != "same-id" || je.Details["same_manifest"] != tt.same {
			t.Errorf("%s: Submit = %v (details %v), want %s with task_id same-id, same_manifest %v", tt.name, err, details(je), job.CodeJobConflict, tt.same)
		}
		if got, want := job.StatusFor(job.CodeOf(err)), job.StatusFor(job.CodeJobConflict); got != want {
			t.Errorf("%s: status %v, want %v", tt.name, got, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(s.Dir("same-id"), "manifest.yaml")); string(b) != string(stored) {
		t.Errorf("stored manifest changed to %q", b)
	}
	if n := q.enqueued.Load(); n != 1 {
		t.Errorf("queued %d times, want once", n)
	}
}

func details(je *job.Error) map[string]any {
	if je == nil {
		return nil
	}
	return je.Details
}

// TestTwoStoresOnOneDirectoryClaimOnce: two stores on one directory (as
// serve and a worker of a shared store are), 100 concurrent submits of
// one id each, accept one task between them.
func TestTwoStoresOnOneDirectoryClaimOnce(t *testing.T) {
	root := t.TempDir()
	q := &countingQueue{}
	var stores []*Store
	for range 2 {
		s, err := New(root, lifecycle.Config{})
		if err != nil {
			t.Fatal(err)
		}
		s.Queue = q
		stores = append(stores, s)
	}
	var accepted, conflicts atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			switch _, err := stores[i%2].Submit([]byte(taskDoc)); job.CodeOf(err) {
			case "":
				accepted.Add(1)
			case job.CodeJobConflict:
				conflicts.Add(1)
			default:
				t.Errorf("Submit = %v", err)
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 1 || conflicts.Load() != 199 || q.enqueued.Load() != 1 {
		t.Errorf("200 submits through two stores: %d accepted, %d conflicts, %d queued; want 1, 199, 1", accepted.Load(), conflicts.Load(), q.enqueued.Load())
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.Name() != "same-id" {
			t.Errorf("the task store holds %s beside the task", e.Name())
		}
	}
}
