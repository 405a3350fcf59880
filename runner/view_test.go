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

var viewed = &viewBackend{}

func init() { backend.Register(viewed) }

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
	viewed.view = backend.View{Roots: []string{dir}, Path: []string{filepath.Join(dir, "bin")}}

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
