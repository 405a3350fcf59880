package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// TestArtifactPatternsCapped: the agent leaves a sparse 8 GiB file and a
// FIFO under a pattern; the task completes, the sparse file is skipped at
// Config.MaxArtifactFileBytes and named in an artifact_skipped event, and
// the outbox never holds more than the cap. (.gitignore keeps both out of
// the patch, which is another collector's business.)
func TestArtifactPatternsCapped(t *testing.T) {
	dir, tk, doc := submit(t, `mkdir -p reports && echo '{}' > reports/ok.json && truncate -s 8G reports/big.bin && mkfifo reports/pipe.json &&
printf 'reports/big.bin\nreports/pipe.json\n' > .gitignore`,
		"lifecycle: {artifact_patterns: [\"reports/*\"]}\n")
	const fileCap = 1 << 20
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{
		Backend: tasktest.Backend(t), CloneBackoff: &quick, MaxArtifactFileBytes: fileCap,
	})
	if err != nil || md.State != state.Completed {
		t.Fatalf("task = %+v %v", md, err)
	}
	var files []string
	for _, a := range md.Artifacts {
		if strings.HasPrefix(a.Name, "files/") {
			files = append(files, a.Name)
		}
	}
	if got := strings.Join(files, " "); got != "files/reports/ok.json" {
		t.Errorf("collected %q, want files/reports/ok.json", got)
	}
	events, err := os.ReadFile(filepath.Join(dir, state.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(events), `"type":"artifact_skipped"`) || !strings.Contains(string(events), "files/reports/big.bin") {
		t.Errorf("events.jsonl does not name the skipped files/reports/big.bin:\n%s", events)
	}
	filepath.Walk(filepath.Join(dir, "outbox"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && fi.Size() > fileCap {
			t.Errorf("%s has %d bytes, over the %d-byte cap", p, fi.Size(), fileCap)
		}
		return nil
	})
}
