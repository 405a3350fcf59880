package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// TestReplayCLIWithIncludeGlobs: `run` of a job whose workspace is
// selected by include and exclude globs, then `replay --run DIR`,
// reproduces (the old replay dropped the globs and always reported
// reproduced false).
func TestReplayCLIWithIncludeGlobs(t *testing.T) {
	store := sandboxTempDir(t)
	ws := t.TempDir()
	for p, c := range map[string]string{"src/a.txt": "a\n", "src/b.log": "b\n", "docs/c.txt": "c\n"} {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	body := `{"workspace":{"path":"` + ws + `","include":["src/**"],"exclude":["**/*.log"]},
	  "command":{"argv":["cat","src/a.txt"]},"policy":{"allowed_commands":["cat"]}}`
	out, stderr, code := cli(t, "", "run", "--request", requestFile(t, body), "--store-dir", store)
	var res job.Result
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Status != job.StatusCompleted {
		t.Fatalf("run: %d %s %s", code, out, stderr)
	}
	out, stderr, code = cli(t, "", "replay", "--run", filepath.Join(store, "runs", res.JobID))
	if code != 0 || !strings.Contains(out, `"reproduced": true`) {
		t.Errorf("replay = %d %s %s, want reproduced true", code, out, stderr)
	}
}
