package session_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/store"
)

// TestSessionOnImage: a create naming an image (through a template)
// gets a sandbox whose root is the image, root inside, keeping /etc
// writes across execs; the record names the image.
func TestSessionOnImage(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("images need a root runner")
	}
	img := backendtest.DebianImage(t)
	lb, err := linuxsandbox.New(backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := lb.Available(context.Background()); err != nil {
		t.Skipf("linux_sandbox is not available here: %v", err)
	}
	set := backend.Set{linuxsandbox.Kind: lb}
	dir := t.TempDir()
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: linuxsandbox.Kind, Backends: set,
		Images: backendtest.Images{"debian:test": img}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	recs, err := store.OpenRecords(filepath.Join(dir, "store", store.Sessions.Dir), store.Sessions)
	if err != nil {
		t.Fatal(err)
	}
	policy := &job.Policy{AllowedCommands: []job.CommandRule{{Basename: "sh"}}, AllowShell: true}
	s, err := session.New(session.Config{Runner: r, Records: recs, Backends: set, DefaultBackend: linuxsandbox.Kind,
		Templates: map[string]session.Template{"debian": {Image: "debian:test", Policy: policy}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec, _, err := s.Create(context.Background(), session.CreateRequest{Template: "debian"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Image != "debian:test" {
		t.Errorf("record image = %q, want debian:test", rec.Image)
	}
	exec := func(cmd string) session.ExecResult {
		res, err := s.Exec(context.Background(), rec.ID, session.ExecRequest{Argv: []string{"sh", "-c", cmd}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	exec("echo session > /etc/kept")
	if res := exec("cat /etc/kept; id -u"); !strings.Contains(res.Stdout, "session\n0") {
		t.Errorf("next exec = %+v, want the /etc write and uid 0", res)
	}
}
