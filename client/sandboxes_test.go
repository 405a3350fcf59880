package client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/store"
)

// sessionServer is the sessions door as serve mounts it, over a real
// session service keeping sandboxes on local_process, behind a bearer
// token ("tok").
func sessionServer(t *testing.T) *client.Client {
	t.Helper()
	return sessionServerWith(t, nil)
}

// sessionServerWith is sessionServer with edit applied to the service's
// config (nil: none).
func sessionServerWith(t *testing.T, edit func(*session.Config)) *client.Client {
	t.Helper()
	dir := t.TempDir()
	set := backend.Set{"local_process": localprocess.Backend{}}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: "local_process", Backends: set})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := store.OpenRecords(filepath.Join(dir, "store", store.Sessions.Dir), store.Sessions)
	if err != nil {
		t.Fatal(err)
	}
	cfg := session.Config{Runner: r, Records: recs, Backends: set, DefaultBackend: "local_process", UnsafeLocalProcess: true}
	if edit != nil {
		edit(&cfg)
	}
	s, err := session.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	sessionapi.Routes(mux, s, func(_ string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer tok" {
				http.Error(w, `{"error":{"code":"auth.unauthorized","message":"no token"}}`, http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); s.Close() })
	return client.New(srv.URL, "tok")
}

// TestSandboxClient: create, exec, files, pause, resume, timeout, list,
// delete, each against the real sessions door.
func TestSandboxClient(t *testing.T) {
	c := sessionServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "sb-1", TimeoutS: 600, Metadata: map[string]string{"owner": "me"}})
	if err != nil || sb.ID != "sb-1" || sb.State != "running" || sb.Backend != "local_process" || sb.TimeoutS != 600 {
		t.Fatalf("CreateSandbox = %+v, %v", sb, err)
	}
	if err := c.WriteSandboxFile(ctx, "sb-1", "src/main.sh", []byte("echo from the file\n"), 0o755); err != nil {
		t.Fatalf("WriteSandboxFile: %v", err)
	}
	res, err := c.SandboxExec(ctx, "sb-1", client.ExecRequest{Argv: []string{"sh", "-c", "./src/main.sh; echo kept > out.txt; echo oops >&2; exit 3"}})
	if err != nil {
		t.Fatalf("SandboxExec: %v", err)
	}
	got := []any{res.Status, res.ExitCode != nil && *res.ExitCode == 3, res.Stdout, res.Stderr, res.RunID}
	want := []any{job.StatusFailed, true, "from the file\n", "oops\n", "sb-1.exec-1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SandboxExec (-want +got):\n%s", diff)
	}
	var buf bytes.Buffer
	if err := c.ReadSandboxFile(ctx, "sb-1", "out.txt", &buf); err != nil || buf.String() != "kept\n" {
		t.Errorf("ReadSandboxFile(out.txt) = %q, %v, want %q", buf.String(), err, "kept\n")
	}

	paused, err := c.PauseSandbox(ctx, "sb-1")
	if err != nil || paused.State != "paused" {
		t.Fatalf("PauseSandbox = %+v, %v", paused, err)
	}
	_, err = c.SandboxExec(ctx, "sb-1", client.ExecRequest{Argv: []string{"true"}})
	assertCode(t, "SandboxExec(paused)", err, job.CodeSessionNotRunning)
	if resumed, err := c.ResumeSandbox(ctx, "sb-1"); err != nil || resumed.State != "running" {
		t.Fatalf("ResumeSandbox = %+v, %v", resumed, err)
	}
	timed, err := c.SetSandboxTimeout(ctx, "sb-1", 60)
	if err != nil || timed.TimeoutS != 60 || timed.ExpiresAt.After(time.Now().Add(61*time.Second)) {
		t.Fatalf("SetSandboxTimeout(60) = %+v, %v", timed, err)
	}

	if _, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "sb-2", Metadata: map[string]string{"owner": "you"}}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	list, err := c.ListSandboxes(ctx, client.SandboxFilter{State: "running", Metadata: map[string]string{"owner": "me"}})
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	if err != nil || !cmp.Equal(ids, []string{"sb-1"}) {
		t.Errorf("ListSandboxes(running, owner=me) = %v, %v, want [sb-1]", ids, err)
	}
	all, err := c.ListSandboxes(ctx, client.SandboxFilter{})
	if err != nil || len(all) != 2 {
		t.Errorf("ListSandboxes() = %d sandboxes, %v, want 2", len(all), err)
	}

	gone, err := c.DeleteSandbox(ctx, "sb-1")
	if err != nil || gone.State != "stopped" || gone.Execs != 1 || gone.EndedAt == nil {
		t.Fatalf("DeleteSandbox = %+v, %v", gone, err)
	}
	if got, err := c.GetSandbox(ctx, "sb-1"); err != nil || got.State != "stopped" {
		t.Errorf("GetSandbox(deleted) = %+v, %v", got, err)
	}
}

// TestSandboxClientErrors: every call answers the server's coded error.
func TestSandboxClientErrors(t *testing.T) {
	c := sessionServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateSandbox(ctx, client.SandboxRequest{ID: "e-1"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, errGet := c.GetSandbox(ctx, "nope")
	_, errExec := c.SandboxExec(ctx, "nope", client.ExecRequest{Argv: []string{"true"}})
	_, errConflict := c.CreateSandbox(ctx, client.SandboxRequest{ID: "e-1", TimeoutS: 5})
	_, errToken := client.New(c.BaseURL, "wrong").ListSandboxes(ctx, client.SandboxFilter{})
	for _, tc := range []struct {
		name string
		err  error
		want job.Code
	}{
		{"GetSandbox(nope)", errGet, job.CodeJobNotFound},
		{"SandboxExec(nope)", errExec, job.CodeJobNotFound},
		{"CreateSandbox(taken id)", errConflict, job.CodeJobConflict},
		{"ListSandboxes(wrong token)", errToken, job.CodeUnauthorized},
		{"ReadSandboxFile(escape)", c.ReadSandboxFile(ctx, "e-1", "../x", &buf), job.CodePathEscape},
		{"ReadSandboxFile(missing)", c.ReadSandboxFile(ctx, "e-1", "missing.txt", &buf), job.CodeJobNotFound},
		{"WriteSandboxFile(absolute)", c.WriteSandboxFile(ctx, "e-1", "/etc/x", []byte("x"), 0), job.CodePathEscape},
	} {
		assertCode(t, tc.name, tc.err, tc.want)
	}
}

func assertCode(t *testing.T, name string, err error, want job.Code) {
	t.Helper()
	var jerr *job.Error
	if !errors.As(err, &jerr) || jerr.Code != want {
		t.Errorf("%s error = %v, want code %s", name, err, want)
	}
}
