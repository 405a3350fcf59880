package runner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/snapshot"
	"github.com/agent-runner/agent-runner/store"
)

// overlayJob runs the snapshot step of an overlay job on ws (no backend:
// local_process has no overlay) and returns its lower layer's directory.
func overlayJob(t *testing.T, r *Runner, id, ws string) string {
	t.Helper()
	if err := r.store.Create(id); err != nil {
		t.Fatal(err)
	}
	e := &execution{r: r, req: job.Request{JobID: id, Workspace: job.Workspace{Path: ws, SnapshotStrategy: job.SnapshotOverlay}}}
	w, err := e.overlay(context.Background(), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(w.Lower)
}

func workspaceWith(t *testing.T, content string) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestRetainLayers: an old layer no run names is removed; an old layer
// named by a run that is still running and a recently used layer no run
// names are kept; a job on the removed layer's workspace fills it again.
func TestRetainLayers(t *testing.T) {
	dir := t.TempDir()
	r, err := New(Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: "local_process"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	now := time.Now()
	past := now.Add(-2 * 24 * time.Hour)

	running := overlayJob(t, r, "job_running", workspaceWith(t, "running"))
	if err := r.store.WriteStatus(store.StatusRecord{JobID: "job_running", Status: job.StatusRunning, UpdatedAt: past}); err != nil {
		t.Fatal(err)
	}
	unusedWS := workspaceWith(t, "unused")
	unused := overlayJob(t, r, "job_gone", unusedWS)
	recent := overlayJob(t, r, "job_gone_too", workspaceWith(t, "recent"))
	for _, id := range []string{"job_gone", "job_gone_too"} {
		r.store.Remove(id)
	}
	for _, l := range []string{running, unused} {
		if err := os.Chtimes(l, past, past); err != nil {
			t.Fatal(err)
		}
	}

	removed, err := r.Retain(now, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removed, []string{CacheDir + "/" + filepath.Base(unused)}; !slices.Equal(got, want) {
		t.Errorf("Retain removed %v, want %v", got, want)
	}
	for l, want := range map[string]bool{running: true, unused: false, recent: true} {
		if _, err := os.Stat(l); (err == nil) != want {
			t.Errorf("layer %s exists = %v after retention, want %v", filepath.Base(l), err == nil, want)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(unused))
	for _, e := range entries {
		if e.Name()[0] == '.' {
			t.Errorf("retention left %s in the cache", e.Name())
		}
	}

	again := overlayJob(t, r, "job_after", unusedWS)
	if got, want := again, unused; got != want {
		t.Errorf("layer after retention = %s, want %s (the same state's key)", got, want)
	}
	if _, err := snapshot.LayerManifest(filepath.Join(again, "tree")); err != nil {
		t.Errorf("layer was not filled again after retention: %v", err)
	}
}

// TestRetainWaitsForAJobPickingItsLayer: while a job holds the cache's
// shared lock (between picking its layer and naming it in snapshot.json),
// Retain does not decide on layers.
func TestRetainWaitsForAJobPickingItsLayer(t *testing.T) {
	r, err := New(Config{StoreDir: filepath.Join(t.TempDir(), "store"), DefaultBackend: "local_process"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	layer := overlayJob(t, r, "job_gone", workspaceWith(t, "x"))
	r.store.Remove("job_gone")
	past := time.Now().Add(-48 * time.Hour)
	os.Chtimes(layer, past, past)
	unlock, err := lockCache(filepath.Dir(layer), false)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []string)
	go func() {
		removed, _ := r.Retain(time.Now(), Retention{})
		done <- removed
	}()
	select {
	case removed := <-done:
		t.Fatalf("Retain removed %v while a job held the cache lock", removed)
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	if got := <-done; len(got) != 1 {
		t.Errorf("Retain after the job released the lock removed %v, want the layer", got)
	}
}
