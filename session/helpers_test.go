package session_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/store"
)

func TestMain(m *testing.M) {
	linuxsandbox.MaybeInit()
	goleak.VerifyTestMain(m)
}

// fixture is a session service over a fresh store.
type fixture struct {
	s    *session.Service
	r    *runner.Runner
	cfg  session.Config
	kind string
}

// backends are the kinds the tests run on: local_process always,
// linux_sandbox where this host has it (else skipped with the reason).
func backends() []string { return []string{"local_process", "linux_sandbox"} }

// newFixture builds the service on kind; edit changes its config.
func newFixture(t testing.TB, kind string, edit func(*session.Config)) *fixture {
	t.Helper()
	var b backend.Backend = localprocess.Backend{}
	if kind == "linux_sandbox" {
		lb, err := linuxsandbox.New(backend.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := lb.Available(context.Background()); err != nil {
			t.Skipf("linux_sandbox is not available here: %v", err)
		}
		b = lb
	}
	set := backend.Set{kind: b}
	dir := t.TempDir()
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: kind, Backends: set})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := store.OpenRecords(filepath.Join(dir, "store", store.Sessions.Dir), store.Sessions)
	if err != nil {
		t.Fatal(err)
	}
	cfg := session.Config{Runner: r, Records: recs, Backends: set, DefaultBackend: kind, UnsafeLocalProcess: true}
	if edit != nil {
		edit(&cfg)
	}
	s, err := session.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &fixture{s: s, r: r, cfg: cfg, kind: kind}
}

// create creates a sandbox from req, failing the test on an error.
func (f *fixture) create(t *testing.T, req session.CreateRequest) session.Record {
	t.Helper()
	rec, created, err := f.s.Create(context.Background(), req)
	if err != nil || !created || rec.State != session.StateRunning {
		t.Fatalf("Create(%+v) = %s, %v, %v; want running, created", req, rec.State, created, err)
	}
	return rec
}

// exec runs argv in sandbox id, failing the test on an error.
func (f *fixture) exec(t *testing.T, id string, argv ...string) session.ExecResult {
	t.Helper()
	res, err := f.s.Exec(context.Background(), id, session.ExecRequest{Argv: argv})
	if err != nil {
		t.Fatalf("Exec(%q) = %v", argv, err)
	}
	return res
}

// wantCode fails the test unless err has code.
func wantCode(t *testing.T, what string, err error, code job.Code) {
	t.Helper()
	if got := job.CodeOf(err); got != code {
		t.Errorf("%s: code = %q (%v), want %q", what, got, err, code)
	}
}

// clock is a settable clock for Config.Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }
