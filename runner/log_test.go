package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/internal/logtest"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/telemetry"
)

// beforeRun is a backend that calls hook before each run of the backend
// it wraps.
type beforeRun struct {
	backend.Backend
	hook func(spec backend.Spec)
}

func (b beforeRun) Run(ctx context.Context, spec backend.Spec) (backend.Outcome, error) {
	b.hook(spec)
	return b.Backend.Run(ctx, spec)
}

// TestReplayLogsARestoredWorkspaceItCannotRemove: the replay's restored
// snapshot cannot be removed (a mount inside it, as root): the replay
// still reports, and the runner logs the leftover once, with the original
// job's id. The removal's error was discarded before.
func TestReplayLogsARestoredWorkspaceItCannotRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a mount inside the restored workspace is what makes its removal fail")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	lp, ok := backend.Lookup("local_process")
	if !ok {
		t.Fatal("local_process is not registered")
	}
	var busy []string
	t.Cleanup(func() {
		for _, p := range busy {
			unix.Unmount(p, unix.MNT_DETACH)
		}
	})
	b := beforeRun{Backend: lp, hook: func(backend.Spec) {
		// Only the replay has a restored workspace in the store.
		restored, _ := filepath.Glob(filepath.Join(store, ".replay-*"))
		for _, r := range restored {
			p := filepath.Join(r, "busy")
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Error(err)
				continue
			}
			if err := unix.Mount("tmpfs", p, "tmpfs", 0, "size=1m"); err != nil {
				t.Errorf("mount tmpfs: %v", err)
				continue
			}
			busy = append(busy, p)
		}
	}}
	var log logtest.Capture
	r, err := runner.New(runner.Config{StoreDir: store, DefaultBackend: "local_process",
		Backends: backend.Set{"local_process": b}, Logger: log.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, r: r, ws: ws, store: store}
	res := f.run(f.request([]string{"cat", "a.txt"}, "cat"))
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err) // the replay must come from the stored snapshot
	}
	rep, err := replayWithin(t, r, r.Store().RunDir(res.JobID))
	if err != nil || rep.Error != nil {
		t.Fatalf("replay = %+v, %v; want a report without error", rep, err)
	}
	if got, want := rep.WorkspaceSource, "snapshot"; got != want {
		t.Fatalf("workspace source = %q, want %q", got, want)
	}
	if len(busy) != 1 {
		t.Fatalf("mounted into %d restored workspaces, want 1", len(busy))
	}
	if !rep.Reproduced {
		t.Errorf("replay did not reproduce: %+v", rep.Checks)
	}
	want := []logtest.Line{{Level: "WARN", Msg: "cannot remove a replay's restored workspace", ID: res.JobID}}
	if got := log.Problems(t, telemetry.KeyJobID); !slices.Equal(got, want) {
		t.Errorf("warnings and errors logged = %+v, want %+v", got, want)
	}
	if _, err := os.Stat(filepath.Dir(busy[0])); err != nil {
		t.Errorf("the restored workspace is gone (%v), yet its removal was to fail", err)
	}
}
