package sandboxpipeline_test

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
)

// imageRunner is a root runner on linux_sandbox whose image store holds
// the test's Debian image as "debian:test" (backendtest.Images over its
// directory), and a workspace for its jobs.
func imageRunner(t *testing.T) (*runner.Runner, string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("images need a root runner")
	}
	img := backendtest.DebianImage(t)
	b, err := linuxsandbox.New(backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Available(context.Background()); err != nil {
		t.Skipf("linux_sandbox unavailable on this host: %v", err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: linuxsandbox.Kind,
		Backends: backend.Set{linuxsandbox.Kind: b}, Images: backendtest.Images{"debian:test": img}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, ws
}

// TestJobOnImage: a job naming backend.image runs its bare program as
// the image has it, as root inside; allow_shell false, which root on a
// writable root defeats, ends backend_unavailable; an image the store
// does not hold is its error; and a runner without a store refuses one.
func TestJobOnImage(t *testing.T) {
	r, ws := imageRunner(t)
	req := job.Request{
		Backend:   job.BackendSpec{Kind: linuxsandbox.Kind, Image: "debian:test"},
		Workspace: job.Workspace{Path: ws},
		Command:   job.Command{Argv: []string{"sh", "-c", "id -u; cat /etc/debian_version; command -v dpkg"}},
		Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: "sh"}}, AllowShell: true},
		Limits:    job.Limits{TimeoutMS: 60_000},
	}
	res := run(t, r, req)
	if res.Status != job.StatusCompleted || !strings.HasPrefix(res.Stdout.Text, "0\n12") || !strings.Contains(res.Stdout.Text, "/usr/bin/dpkg") {
		t.Fatalf("job on an image = %s %+v\nstdout: %s\nstderr: %s", res.Status, res.Error, res.Stdout.Text, res.Stderr.Text)
	}

	noShell := req
	noShell.JobID, noShell.Policy.AllowShell = "", false
	noShell.Command.Argv = []string{"id", "-u"}
	noShell.Policy.AllowedCommands = []job.CommandRule{{Basename: "id"}}
	if res := run(t, r, noShell); res.Status != job.StatusBackendUnavailable {
		t.Errorf("allow_shell false on an image = %s %+v, want %s", res.Status, res.Error, job.StatusBackendUnavailable)
	}

	missing := req
	missing.JobID, missing.Backend.Image = "", "nope:latest"
	if res := run(t, r, missing); res.Error == nil || res.Error.Code != job.CodeJobNotFound {
		t.Errorf("an image the store lacks = %s %+v, want %s", res.Status, res.Error, job.CodeJobNotFound)
	}

	bare, err := runner.New(runner.Config{StoreDir: filepath.Join(t.TempDir(), "store"), DefaultBackend: linuxsandbox.Kind, Backends: r.Config().Backends})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	again := req
	again.JobID = ""
	err = bare.Prepare(&again)
	if jerr, ok := err.(*job.Error); !ok || jerr.Code != job.CodeInvalidRequest || jerr.Details["field"] != "backend.image" {
		t.Errorf("Prepare with an image on a runner without a store = %v, want %s with field backend.image", err, job.CodeInvalidRequest)
	}
}

// TestSandboxOnImage: a kept sandbox on an image (a session's, a task's)
// keeps what one step writes to /etc for the next.
func TestSandboxOnImage(t *testing.T) {
	r, ws := imageRunner(t)
	b := r.Config().Backends[linuxsandbox.Kind]
	sb, err := r.OpenSandbox(context.Background(), runner.SandboxSpec{ID: "sbx_image", Backend: b, Workspace: ws, Image: "debian:test"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	step := func(id string, argv ...string) job.Result {
		req := job.Request{JobID: id, Workspace: job.Workspace{Path: ws}, Command: job.Command{Argv: argv},
			Policy: job.Policy{AllowedCommands: []job.CommandRule{{Basename: "sh"}}, AllowShell: true}, Limits: job.Limits{TimeoutMS: 60_000}}
		res, err := r.Step(context.Background(), req, runner.Options{Step: &runner.Step{Sandbox: sb}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := step("sbx_image.1", "sh", "-c", "echo kept > /etc/kept"); res.Status != job.StatusCompleted {
		t.Fatalf("write /etc = %s %+v %s", res.Status, res.Error, res.Stderr.Text)
	}
	if res := step("sbx_image.2", "sh", "-c", "cat /etc/kept; id -u"); res.Stdout.Text != "kept\n0\n" {
		t.Errorf("next step = %q (%s %+v), want kept and uid 0", res.Stdout.Text, res.Status, res.Error)
	}
}
