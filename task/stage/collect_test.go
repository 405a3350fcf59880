package stage

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

func TestMain(m *testing.M) {
	linuxsandbox.MaybeInit()
	os.Exit(m.Run())
}

// taskDir is a task directory the sandbox's uid can reach (its ancestors
// searchable, as a task store's are).
func taskDir(t *testing.T) string {
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		os.Chmod(p, 0o755)
	}
	return d
}

// collect runs Collect on the test backend with the default limits.
func collect(t *testing.T, l Layout, tk *manifest.Task) ([]Artifact, error) {
	return Collect(context.Background(), l, tk, tasktest.Backend(t), CollectLimits{})
}
