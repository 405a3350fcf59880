package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/internal/logtest"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/tasktest"
)

// beforeFirstRun is a backend that calls hook once, before the first run
// (the agent's) of the backend it wraps.
type beforeFirstRun struct {
	backend.Backend
	once *sync.Once
	hook func(spec backend.Spec)
}

func (b beforeFirstRun) Run(ctx context.Context, spec backend.Spec) (backend.Outcome, error) {
	b.once.Do(func() { b.hook(spec) })
	return b.Backend.Run(ctx, spec)
}

// TestWorkspaceRemovalFailureIsLoggedOnce: a failed task whose workspace
// cannot be destroyed (a mount inside inbox/, as root) still ends failed
// with its metadata, and the leftover is logged once, with the task's id.
// RemoveWorkspace's error was discarded before.
func TestWorkspaceRemovalFailureIsLoggedOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a mount inside the workspace is what makes its removal fail")
	}
	dir, tk, doc := submit(t, `exit 1`, "lifecycle: {failure_action: destroy}\n")
	busy := filepath.Join(dir, "inbox", "busy")
	mounted := false
	t.Cleanup(func() {
		if mounted {
			unix.Unmount(busy, unix.MNT_DETACH)
		}
	})
	b := beforeFirstRun{Backend: tasktest.Backend(t), once: &sync.Once{}, hook: func(backend.Spec) {
		if err := os.Mkdir(busy, 0o755); err != nil {
			t.Error(err)
			return
		}
		if err := unix.Mount("tmpfs", busy, "tmpfs", 0, "size=1m"); err != nil {
			t.Errorf("mount tmpfs: %v", err)
			return
		}
		mounted = true
	}}
	var log logtest.Capture
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: b, CloneBackoff: &quick, Logger: log.Logger()})
	if err != nil || md.State != state.Failed {
		t.Fatalf("task = %+v, %v; want failed without error", md, err)
	}
	if !mounted {
		t.Fatal("the agent ran without the mount in its workspace")
	}
	if _, err := os.Stat(busy); err != nil {
		t.Errorf("the workspace's mount point is gone (%v), yet its removal was to fail", err)
	}
	want := []logtest.Line{{Level: "WARN", Msg: "cannot remove the task's workspace", ID: tk.Metadata.ID}}
	if diff := cmp.Diff(want, log.Problems(t, lifecycle.LogTaskID)); diff != "" {
		t.Errorf("warnings and errors logged (-want +got):\n%s", diff)
	}
}

// TestRunFailureIsLoggedOnce: a task whose metadata.json cannot be
// written ends with Run's error, logged once by Run (its caller runs it in
// the background and does not log it again).
func TestRunFailureIsLoggedOnce(t *testing.T) {
	dir, tk, doc := submit(t, `echo done > a.txt`, "")
	// A directory where metadata.json goes: the write fails, as root too.
	if err := os.MkdirAll(filepath.Join(dir, "outbox", "artifacts", "metadata.json", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	var log logtest.Capture
	md, err := lifecycle.Run(context.Background(), dir, tk, doc, lifecycle.Config{Backend: tasktest.Backend(t), CloneBackoff: &quick, Logger: log.Logger()})
	if err == nil {
		t.Fatalf("task = %+v, nil error; want metadata.json's", md)
	}
	want := []logtest.Line{{Level: "ERROR", Msg: "task run failed", ID: tk.Metadata.ID}}
	if diff := cmp.Diff(want, log.Problems(t, lifecycle.LogTaskID)); diff != "" {
		t.Errorf("warnings and errors logged (-want +got):\n%s", diff)
	}
}
