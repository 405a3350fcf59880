package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// cacheBackend binds by reading and writing its binds directly: each run
// records the file "owner" of its first bind, then writes its argv[1]
// there.
type cacheBackend struct {
	mu   sync.Mutex
	seen []string
}

func (b *cacheBackend) Kind() string { return "cache_test" }
func (b *cacheBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Isolating: true, Binds: true}
}
func (b *cacheBackend) Available(context.Context) error { return nil }
func (b *cacheBackend) Run(_ context.Context, spec backend.Spec) (backend.Outcome, error) {
	owner := filepath.Join(spec.Binds[0].Source, "owner")
	got, _ := os.ReadFile(owner)
	b.mu.Lock()
	b.seen = append(b.seen, string(got))
	b.mu.Unlock()
	if err := os.WriteFile(owner, []byte(spec.Argv[1]), 0o644); err != nil {
		return backend.Outcome{}, err
	}
	code := 0
	return backend.Outcome{ExitCode: &code, Reason: job.ReasonExit}, nil
}

// TestCachesAreTheCallers: two callers naming one cache see different
// contents, each its own across jobs; a name the operator shares is one
// cache for both.
func TestCachesAreTheCallers(t *testing.T) {
	f := newFixture(t, nil)
	b := &cacheBackend{}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(t.TempDir(), "store"), DefaultBackend: "cache_test", Backends: backend.Set{"cache_test": b}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	run := func(caller, cache, who string) {
		t.Helper()
		req := f.request([]string{"true", who}, "true")
		req.Backend.Kind = "cache_test"
		req.Workspace.Caches = []job.Cache{{Name: cache, Path: "/cache/x"}}
		res, err := r.Run(context.Background(), req, runner.Options{CacheNamespace: caller, SharedCaches: []string{"shared-x"}})
		if err != nil || res.Status != job.StatusCompleted {
			t.Fatalf("job of %s: %v %s %+v", who, err, res.Status, res.Error)
		}
	}
	alice, bob := buildcache.TokenNamespace("alice"), buildcache.TokenNamespace("bob")
	run(alice, "go-build", "alice")
	run(bob, "go-build", "bob")
	run(alice, "go-build", "alice again")
	run("", "go-build", "local")
	run(alice, "shared-x", "alice")
	run(bob, "shared-x", "bob")
	want := []string{"", "", "alice", "", "", "alice"}
	if diff := cmp.Diff(want, b.seen); diff != "" {
		t.Errorf("what each job found in its cache (-want +got):\n%s", diff)
	}
	caches := filepath.Join(r.Store().Dir(), runner.CachesDir)
	for dir, want := range map[string]string{
		"token-alice/go-build": "alice again",
		"token-bob/go-build":   "bob",
		"local/go-build":       "local",
		"shared/shared-x":      "bob",
	} {
		if got, err := os.ReadFile(filepath.Join(caches, dir, "owner")); err != nil || string(got) != want {
			t.Errorf("%s/owner = %q, %v; want %q", dir, got, err, want)
		}
	}
}
