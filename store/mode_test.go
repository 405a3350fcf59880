package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// TestStoreIsPrivate: records were 0644 in 0755 directories, so any local
// user read request.json's env values and every job's output.
func TestStoreIsPrivate(t *testing.T) {
	root := t.TempDir()
	os.Chmod(root, 0o755) // as an older version left it
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(job.Request{JobID: "job_a"}, StatusRecord{JobID: "job_a", Status: job.StatusQueued}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteResult(job.Result{JobID: "job_a", Status: job.StatusCompleted, EndedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root, filepath.Join(root, "runs"), s.RunDir("job_a")} {
		fi, _ := os.Stat(p)
		if got := fi.Mode().Perm(); got&0o066 != 0 || got&0o011 != 0o011 {
			t.Errorf("%s mode = %v, want others to pass through only (0711)", p, got)
		}
	}
	for _, name := range []string{RequestFile, StatusFile, ResultFile} {
		fi, err := os.Stat(filepath.Join(s.RunDir("job_a"), name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != RecordFileMode {
			t.Errorf("%s mode = %v, want %v", name, got, RecordFileMode)
		}
	}
}
