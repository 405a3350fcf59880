package runs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/plane"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/workspaceroot"

	_ "github.com/agent-runner/agent-runner/backend/localprocess"
)

// env is a Service on a workspace root with a logs directory, its jobs on
// a plane of local_process workers.
type env struct {
	svc  *Service
	cfg  Config
	root string // the workspace root
	runs string // the agent runs directory
}

func newEnv(t *testing.T) *env {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "ws")
	storeDir := filepath.Join(root, "store")
	for _, d := range []string{filepath.Join(root, "logs"), filepath.Join(root, "out"), storeDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "logs", "app.log"), []byte("INFO start\nERROR disk full\n"), 0o644)
	r, err := runner.New(runner.Config{StoreDir: storeDir, DefaultBackend: "local_process"})
	if err != nil {
		t.Fatal(err)
	}
	roots, err := workspaceroot.New([]string{root}, storeDir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plane.Open(context.Background(), plane.Config{Runner: r, Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{Dir: filepath.Join(storeDir, "agent-runs"), Runner: r, Backend: "local_process", Roots: roots}
	svc, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		svc.Wait()
		p.Close()
		r.Close()
	})
	return &env{svc: svc, cfg: cfg, root: root, runs: cfg.Dir}
}

const listManifest = "name: lister\ncapabilities:\n  tools: [list_logs]\n  filesystem:\n    read: [logs]\n"

// finished launches a one-step scripted run and waits for its end.
func (e *env) finished(t *testing.T) string {
	t.Helper()
	info, err := e.svc.Launch(LaunchRequest{ManifestYAML: listManifest, Mode: ModeTask, TaskYAML: "steps: [{tool: list_logs, args: {directory: logs}}]"})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.Wait()
	run, err := e.svc.Get(info.RunID)
	if err != nil || run.Status != StatusFinished {
		t.Fatalf("run %s = %+v, %v; want finished", info.RunID, run.Info, err)
	}
	return info.RunID
}

// TestRunIsAStoreRecord: a launched run is a capability-run record of
// the store: its id follows the store's rule, its directory and files are
// private, its request digest is stored, and its lock is free once it
// ended.
func TestRunIsAStoreRecord(t *testing.T) {
	e := newEnv(t)
	id := e.finished(t)
	if !store.ValidID(id) {
		t.Errorf("run id %q breaks the store's id rule", id)
	}
	dir := filepath.Join(e.runs, id)
	for name, want := range map[string]os.FileMode{"": store.PrivateDirMode, "summary.json": store.RecordFileMode, "manifest.yaml": store.RecordFileMode, "task.yaml": store.RecordFileMode, store.DigestFile: store.RecordFileMode} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s/%s: %v %v, want mode %v", id, name, fi.Mode().Perm(), err, want)
		}
	}
	if e.svc.records.Locked(id) {
		t.Errorf("run %s is still locked after it ended", id)
	}
}

// TestRunInProgressIsLockedAndClaimed: a run in progress holds its
// record's lock, so another service on the same directory (another
// process sharing the store) never retains it; and an id already
// recorded cannot be claimed again.
func TestRunInProgressIsLockedAndClaimed(t *testing.T) {
	e := newEnv(t)
	const id = "33333333-3333-4333-8333-333333333333"
	a, err := e.svc.admit(id, reach{}, Info{RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.claim(a, id, LaunchRequest{Mode: ModeMock}); err != nil {
		t.Fatal(err)
	}
	defer e.svc.done(id)
	if !e.svc.records.Locked(id) {
		t.Fatalf("run %s in progress is not locked", id)
	}
	other, err := New(context.Background(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	removed, err := other.Retain(time.Now().Add(365 * 24 * time.Hour))
	if err != nil || len(removed) != 0 {
		t.Errorf("another service's Retain = %v, %v; want nothing removed", removed, err)
	}
	b, err := other.admit(id, reach{}, Info{RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.claim(b, id, LaunchRequest{Mode: ModeMock}); job.CodeOf(err) != job.CodeJobConflict {
		t.Errorf("second claim of %s = %v, want %s", id, err, job.CodeJobConflict)
	}
	other.done(id)
}

// TestRetainRuns: finished and interrupted runs go once their retention
// age has passed since they ended; younger ones and runs in progress stay.
func TestRetainRuns(t *testing.T) {
	e := newEnv(t)
	done := e.finished(t)
	// An interrupted run: a record with an audit log and no summary, in
	// progress nowhere.
	const interrupted = "44444444-4444-4444-8444-444444444444"
	if _, err := e.svc.records.Claim(interrupted, "d", func(dir string) error {
		return os.WriteFile(filepath.Join(dir, "audit.jsonl"), []byte("{}\n"), 0o600)
	}); err != nil {
		t.Fatal(err)
	}
	const running = "55555555-5555-4555-8555-555555555555"
	a, err := e.svc.admit(running, reach{}, Info{RunID: running})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.claim(a, running, LaunchRequest{Mode: ModeMock}); err != nil {
		t.Fatal(err)
	}
	defer e.svc.done(running)

	if removed, err := e.svc.Retain(time.Now()); err != nil || len(removed) != 0 {
		t.Errorf("Retain(now) = %v, %v; want nothing removed", removed, err)
	}
	removed, err := e.svc.Retain(time.Now().Add(DefaultRetention + time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want := []string{interrupted, done}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("Retain after the age removed %v, want %v", removed, want)
	}
	if _, err := e.svc.Get(done); job.CodeOf(err) != job.CodeJobNotFound {
		t.Errorf("Get of a retained run = %v, want %s", err, job.CodeJobNotFound)
	}
	if _, err := os.Stat(filepath.Join(e.runs, running)); err != nil {
		t.Errorf("the run in progress was removed: %v", err)
	}
}

// TestRunInProgressHoldsItsWriteRoot: while a run may write in a
// directory, no other run may take a root beneath it (a job there could
// turn it into a symlink), and a write root may not hold another run's
// root.
func TestRunInProgressHoldsItsWriteRoot(t *testing.T) {
	e := newEnv(t)
	for _, d := range []string{"out/a", "logs/sub"} {
		os.MkdirAll(filepath.Join(e.root, d), 0o755)
	}
	writer := reach{roots: []string{filepath.Join(e.root, "out")}, write: []string{filepath.Join(e.root, "out")}}
	if _, err := e.svc.admit("11111111-1111-4111-8111-111111111111", writer, Info{RunID: "11111111-1111-4111-8111-111111111111"}); err != nil {
		t.Fatal(err)
	}
	reader := reach{roots: []string{filepath.Join(e.root, "logs", "sub")}}
	if _, err := e.svc.admit("22222222-2222-4222-8222-222222222222", reader, Info{RunID: "22222222-2222-4222-8222-222222222222"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, read, write string
		want              job.Code
	}{
		{"read root beneath a running run's write root", "[out/a]", "[]", job.CodePathEscape},
		{"that write root itself", "[out]", "[]", ""},
		{"write root holding a running run's root", "[]", "[logs]", job.CodePathEscape},
		{"write root equal to a running run's root", "[]", "[logs/sub]", ""},
		{"elsewhere", "[logs]", "[]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := "name: n\ncapabilities:\n  tools: [list_logs]\n  filesystem:\n    read: " + tt.read + "\n    write: " + tt.write + "\n"
			_, err := e.svc.Launch(LaunchRequest{ManifestYAML: m, Mode: ModeTask, TaskYAML: "steps: [{tool: list_logs, args: {directory: logs}}]"})
			if got := job.CodeOf(err); got != tt.want {
				t.Errorf("Launch = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestRunInProgressHoldsJobWorkspaces: a job whose workspace contains a
// running run's write root (or lies inside it) was snapshotted while the
// run's jobs wrote there (issue: the write root made 0777, swapped with a
// symlink to /etc).
func TestRunInProgressHoldsJobWorkspaces(t *testing.T) {
	e := newEnv(t)
	out := filepath.Join(e.root, "proj", "out")
	os.MkdirAll(filepath.Join(out, "deep"), 0o755)
	os.MkdirAll(filepath.Join(e.root, "other"), 0o755)
	writer := reach{roots: []string{out}, write: []string{out}}
	if _, err := e.svc.admit("11111111-1111-4111-8111-111111111111", writer, Info{RunID: "11111111-1111-4111-8111-111111111111"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, ws string
		want     job.Code
	}{
		{"workspace holding the write root", filepath.Join(e.root, "proj"), job.CodePathEscape},
		{"the write root itself", out, job.CodePathEscape},
		{"inside the write root", filepath.Join(out, "deep"), job.CodePathEscape},
		{"elsewhere", filepath.Join(e.root, "other"), ""},
	}
	for _, tt := range tests {
		if got := job.CodeOf(e.svc.HoldsWorkspace(tt.ws)); got != tt.want {
			t.Errorf("%s: HoldsWorkspace(%s) = %q, want %q", tt.name, tt.ws, got, tt.want)
		}
	}
}
