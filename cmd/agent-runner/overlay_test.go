package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// TestOverlaySnapshots runs two jobs on one workspace state with
// snapshot_strategy overlay: both share one cached lower layer, each sees
// only its own writes, the original workspace is untouched, artifacts are
// read through the layers and replay reproduces.
func TestOverlaySnapshots(t *testing.T) {
	sandboxUsable(t)
	store := t.TempDir()
	os.Chmod(filepath.Dir(store), 0o755)
	os.Chmod(store, 0o755)
	ws := t.TempDir()
	os.Chmod(filepath.Dir(ws), 0o755)
	os.Chmod(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "data.txt"), []byte("original\n"), 0o644)
	body := `{"workspace":{"path":"` + ws + `","snapshot_strategy":"overlay"},
	  "command":{"argv":["/usr/bin/python3","-c","import os; print(open('data.txt').read().strip(), os.path.exists('mine.txt')); open('data.txt','a').write('job\\n'); open('mine.txt','w').write('x'); os.remove('gone.txt') if os.path.exists('gone.txt') else None"]},
	  "policy":{"allowed_commands":["python3"],"artifact_globs":["*.txt"]},
	  "backend":{"kind":"linux_sandbox"}}`
	var results []job.Result
	for i := 0; i < 2; i++ {
		out, stderr, code := cli(t, "", "run", "--store-dir", store, "--request", requestFile(t, body))
		var res job.Result
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Status != job.StatusCompleted {
			t.Fatalf("overlay job %d: %d %s %s %+v", i, code, stderr, res.Status, res.Error)
		}
		if res.Stdout.Text != "original False\n" {
			t.Errorf("job %d saw %q: a previous job's writes leaked into its snapshot", i, res.Stdout.Text)
		}
		results = append(results, res)
	}
	if results[0].Replay.WorkspaceSnapshotSHA256 != results[1].Replay.WorkspaceSnapshotSHA256 {
		t.Error("two jobs on the same state have different snapshot hashes")
	}
	layers, _ := os.ReadDir(filepath.Join(store, "cache", "workspaces"))
	if len(layers) != 1 {
		t.Errorf("%d cached layers, want 1 shared by both jobs", len(layers))
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "data.txt")); string(b) != "original\n" {
		t.Errorf("the caller's workspace changed: %q", b)
	}
	var paths []string
	for _, a := range results[0].Artifacts {
		paths = append(paths, a.Path)
	}
	if strings.Join(paths, ",") != "data.txt,mine.txt" || results[0].Artifacts[0].SHA256 != job.SHA256Hex([]byte("original\njob\n")) {
		t.Errorf("artifacts through the layers = %+v", results[0].Artifacts)
	}
	// Same hash as a copy snapshot of the same state.
	copyBody := strings.Replace(body, `"snapshot_strategy":"overlay"`, `"snapshot_strategy":"copy"`, 1)
	out, _, _ := cli(t, "", "run", "--store-dir", store, "--request", requestFile(t, copyBody))
	var copied job.Result
	json.Unmarshal([]byte(out), &copied)
	if copied.Replay.WorkspaceSnapshotSHA256 != results[0].Replay.WorkspaceSnapshotSHA256 {
		t.Errorf("copy and overlay snapshots of one state hash differently")
	}
	out, stderr, code := cli(t, "", "replay", "--run", filepath.Join(store, "runs", results[0].JobID))
	if code != 0 || !strings.Contains(out, `"workspace_source": "snapshot"`) || !strings.Contains(out, `"reproduced": true`) {
		t.Errorf("replay of an overlay job: %d %s %s", code, out, stderr)
	}
}
