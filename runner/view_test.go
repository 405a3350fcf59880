package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// viewBackend is a backend that sees only its view; it records the spec
// it is given instead of running it.
type viewBackend struct {
	view backend.View
	mu   sync.Mutex
	got  []backend.Spec
}

func (b *viewBackend) Kind() string { return "view_test" }
func (b *viewBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Isolating: true}
}
func (b *viewBackend) Available(context.Context) error { return nil }
func (b *viewBackend) View() backend.View              { return b.view }
func (b *viewBackend) Run(_ context.Context, spec backend.Spec) (backend.Outcome, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, spec)
	code := 0
	return backend.Outcome{ExitCode: &code, Reason: job.ReasonExit}, nil
}

// onViewBackend points f at a runner whose only backend is b, under the
// kind "view_test", which nothing registers: the runner runs its Set's
// instance, never a registry's.
func onViewBackend(t *testing.T, f *fixture, b *viewBackend) {
	t.Helper()
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(t.TempDir(), "store"), DefaultBackend: "view_test", Backends: backend.Set{"view_test": b}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	f.r = r
}

// TestJobsResolveInTheBackendsView: on a backend with a view, a bare
// program name resolves on the view's PATH to a program inside it (never
// on the runner's search path), the child's PATH is the view's, and a
// program outside the view is denied before anything runs.
func TestJobsResolveInTheBackendsView(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	tool := filepath.Join(dir, "bin", "true")
	os.MkdirAll(filepath.Dir(tool), 0o755)
	os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755)
	viewed := &viewBackend{view: backend.View{Roots: []string{dir}, Path: []string{filepath.Join(dir, "bin")}}}
	onViewBackend(t, f, viewed)

	req := f.request([]string{"true"}, "true")
	req.Backend.Kind = "view_test"
	res := f.run(req)
	if res.Status != job.StatusCompleted || len(viewed.got) != 1 {
		t.Fatalf("bare name in the view: %s %+v", res.Status, res.Error)
	}
	if got, want := viewed.got[0].Argv[0], tool; got != want {
		t.Errorf("argv[0] = %q, want %q (the view's, not the runner's /usr/bin/true)", got, want)
	}
	if want := "PATH=" + filepath.Join(dir, "bin"); !slices.Contains(viewed.got[0].Env, want) {
		t.Errorf("env = %q, want %s", viewed.got[0].Env, want)
	}

	req = f.request([]string{"/usr/bin/true"}, "true")
	req.Backend.Kind = "view_test"
	res = f.run(req)
	if res.Status != job.StatusPolicyDenied || res.Error.Code != job.CodeCommandDenied || len(viewed.got) != 1 {
		t.Errorf("program outside the view = %s %+v (ran %d), want policy_denied %s before it runs", res.Status, res.Error, len(viewed.got), job.CodeCommandDenied)
	}
}

// TestRunnersKeepTheirOwnInstances: two runners in one process, each
// given its own instance of one kind with a different view, decide and
// run each job with their own.
func TestRunnersKeepTheirOwnInstances(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "bin", "tool")
	os.MkdirAll(filepath.Dir(tool), 0o755)
	os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755)
	wide := &viewBackend{view: backend.View{Roots: []string{"/usr", dir}, Path: []string{filepath.Join(dir, "bin")}}}
	narrow := &viewBackend{view: backend.View{Roots: []string{"/usr"}, Path: []string{"/usr/bin"}}}
	tests := []struct {
		name string
		b    *viewBackend
		want job.Status
		ran  int
	}{
		{"view with the tool", wide, job.StatusCompleted, 1},
		{"view without it", narrow, job.StatusPolicyDenied, 0},
	}
	for _, tt := range tests {
		f := newFixture(t, nil)
		onViewBackend(t, f, tt.b)
		req := f.request([]string{tool}, "tool")
		req.Backend.Kind = "view_test"
		res := f.run(req)
		if res.Status != tt.want || len(tt.b.got) != tt.ran {
			t.Errorf("%s: status %s (ran %d), want %s (ran %d)", tt.name, res.Status, len(tt.b.got), tt.want, tt.ran)
		}
	}
}
