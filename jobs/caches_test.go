package jobs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/plane"
	"github.com/agent-runner/agent-runner/runner"
)

// ownerBackend binds by writing its argv[1] to the file "owner" of each
// bind, after reading what was there to stdout.
type ownerBackend struct{}

func (ownerBackend) Kind() string { return "owner_test" }
func (ownerBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Isolating: true, Binds: true}
}
func (ownerBackend) Available(context.Context) error { return nil }
func (ownerBackend) Run(_ context.Context, spec backend.Spec) (backend.Outcome, error) {
	for _, b := range spec.Binds {
		p := filepath.Join(b.Source, "owner")
		old, _ := os.ReadFile(p)
		spec.Stdout.Write(old)
		if err := os.WriteFile(p, []byte(spec.Argv[1]), 0o644); err != nil {
			return backend.Outcome{}, err
		}
	}
	code := 0
	return backend.Outcome{ExitCode: &code, Reason: job.ReasonExit}, nil
}

// TestCachesTravelWithTheirCaller: through the queue and a worker, two
// callers naming one cache see different contents; a caller-less submit
// naming a cache is refused; a shared name is one cache for all.
func TestCachesTravelWithTheirCaller(t *testing.T) {
	dir := t.TempDir()
	b := ownerBackend{}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: b.Kind(), Backends: backend.Set{b.Kind(): b}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	p, err := plane.Open(context.Background(), plane.Config{Runner: r, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	svc := p.Jobs
	svc.ShareCaches([]string{"npm"})
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(ns, cache, who string) string {
		t.Helper()
		req := request("", ws, "true", who)
		req.Workspace.Caches = []job.Cache{{Name: cache, Path: "/cache"}}
		acc, _, err := svc.SubmitAs(ctx, ns, &req)
		if err != nil {
			t.Fatalf("submit as %q: %v", ns, err)
		}
		res, err := svc.Wait(ctx, acc.JobID)
		if err != nil || res.Status != job.StatusCompleted {
			t.Fatalf("job of %s: %v %s %+v", who, err, res.Status, res.Error)
		}
		return res.Stdout.Text
	}
	alice, bob := buildcache.TokenNamespace("alice"), buildcache.TokenNamespace("bob")
	for _, tt := range []struct{ ns, cache, who, want string }{
		{alice, "go-build", "alice", ""},
		{bob, "go-build", "bob", ""},
		{alice, "go-build", "alice 2", "alice"},
		{bob, "go-build", "bob 2", "bob"},
		{alice, "npm", "alice", ""},
		{bob, "npm", "bob", "alice"},
	} {
		if got := run(tt.ns, tt.cache, tt.who); got != tt.want {
			t.Errorf("%s's job on %s found %q, want %q", tt.who, tt.cache, got, tt.want)
		}
	}
	req := request("", ws, "true", "anyone")
	req.Workspace.Caches = []job.Cache{{Name: "go-build", Path: "/cache"}}
	_, _, err = svc.Submit(ctx, &req)
	if got, want := job.CodeOf(err), job.CodeInvalidRequest; got != want {
		t.Errorf("caller-less submit with a cache: code %q, want %q (%v)", got, want, err)
	}
}
