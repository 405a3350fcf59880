package linuxsandbox_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend/backendtest"
)

// TestCloseLeavesNoCgroups: a one-shot Run removes its cgroups in the
// background; Close waits for that, so a process that exits right after
// its last Run (agent-runner run, a bench) leaves no empty group behind.
func TestCloseLeavesNoCgroups(t *testing.T) {
	b := sandbox(t)
	ctx := context.Background()
	spec, _, _ := backendtest.Spec(t, "/bin/true")
	spec.JobID = "job_close-leaves-no-cgroups"
	for range 5 {
		if o, err := b.Run(ctx, spec); err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
			t.Fatalf("Run = %+v, %v", o, err)
		}
	}
	b.Close()
	var left []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), "agent-runner-"+spec.JobID+"-") {
			left = append(left, p)
			return filepath.SkipDir
		}
		return nil
	})
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		t.Skip("no /sys/fs/cgroup on this host")
	}
	if len(left) > 0 {
		t.Errorf("cgroups left after Close: %v", left)
	}
}
