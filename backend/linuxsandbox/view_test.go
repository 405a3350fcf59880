package linuxsandbox_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/job"
)

// privateDir is a directory under a parent only its owner may search
// (0700), as a store under /root or a private home is.
func privateDir(t *testing.T) string {
	t.Helper()
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "store")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestNewSandboxReadOnly(t *testing.T) {
	dir := filepath.Join(privateDir(t), "tools")
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\necho tool ran\n"), 0o755)
	b := sandboxWith(t, backend.Config{ReadOnly: []string{dir}})
	tool := filepath.Join(dir, "bin", "tool")
	spec, out, errb := backendtest.Spec(t, "/bin/sh", "-c", tool+"; touch "+dir+"/new && echo WROTE || echo READ-ONLY")
	o, err := b.Run(context.Background(), spec)
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("run: %v %+v %s", err, o, errb.String())
	}
	if got, want := out.String(), "tool ran\nREAD-ONLY\n"; got != want {
		t.Errorf("--sandbox-ro dir: stdout = %q, want %q (stderr %s)", got, want, errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Errorf("the sandbox wrote into a read-only directory")
	}
	v := b.View()
	for p, want := range map[string]bool{tool: true, "/usr/bin/env": true, "/root/.profile": false, "/etc/shadow": false, "bin/tool": false} {
		if got := v.Visible(p); got != want {
			t.Errorf("View().Visible(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestInstancesKeepTheirOwnViews: instances built with different
// configurations run side by side in one process, each with its own view:
// one sees an extra read-only directory (less a masked file in it), one
// sees the same directory unmasked, and one does not see it at all. With
// the view a package global, the last configuration won for every
// instance.
func TestInstancesKeepTheirOwnViews(t *testing.T) {
	tools := filepath.Join(privateDir(t), "tools")
	os.Mkdir(tools, 0o755)
	os.WriteFile(filepath.Join(tools, "lib.txt"), []byte("lib"), 0o644)
	secret := filepath.Join(tools, "secret.txt")
	os.WriteFile(secret, []byte("secret"), 0o644)
	tests := []struct {
		name string
		cfg  backend.Config
		want string
	}{
		{"read-only dir, one file masked", backend.Config{ReadOnly: []string{tools}, Masked: []string{secret}}, "lib|"},
		{"read-only dir", backend.Config{ReadOnly: []string{tools}}, "lib|secret"},
		{"default view", backend.Config{}, "UNSEEN|UNSEEN"},
	}
	script := "cat " + tools + "/lib.txt 2>/dev/null || printf UNSEEN; printf '|'; cat " + secret + " 2>/dev/null || printf UNSEEN"
	backends := make([]*linuxsandbox.Backend, len(tests))
	for i, tt := range tests {
		backends[i] = sandboxWith(t, tt.cfg)
	}
	outs := make([]*backendtest.Buffer, len(tests))
	errs := make([]error, len(tests))
	var wg sync.WaitGroup
	for i := range tests {
		spec, out, _ := backendtest.Spec(t, "/bin/sh", "-c", script)
		outs[i] = out
		wg.Go(func() { _, errs[i] = backends[i].Run(context.Background(), spec) })
	}
	wg.Wait()
	for i, tt := range tests {
		if errs[i] != nil {
			t.Errorf("%s: Run: %v", tt.name, errs[i])
			continue
		}
		if got := outs[i].String(); got != tt.want {
			t.Errorf("%s: stdout = %q, want %q", tt.name, got, tt.want)
		}
	}
	for i, tt := range tests {
		if got, want := backends[i].View().Visible(filepath.Join(tools, "lib.txt")), len(tt.cfg.ReadOnly) > 0; got != want {
			t.Errorf("%s: View().Visible(lib.txt) = %v, want %v", tt.name, got, want)
		}
		if got, want := backends[i].View().Visible(secret), len(tt.cfg.ReadOnly) > 0 && len(tt.cfg.Masked) == 0; got != want {
			t.Errorf("%s: View().Visible(secret.txt) = %v, want %v", tt.name, got, want)
		}
	}
}

func TestNewRefusesWhatTheSandboxCannotSee(t *testing.T) {
	dir := privateDir(t)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	private := filepath.Join(dir, "private")
	os.Mkdir(private, 0o700)
	tests := []struct {
		name, dir, want string
		root            bool
	}{
		{"missing", filepath.Join(dir, "missing"), "does not exist", false},
		{"relative", "tools", "not an absolute path", false},
		{"a file", file, "is not a directory", false},
		{"the root", "/", "would replace the sandbox's own /", false},
		{"the sandbox's /proc", "/proc/self", "lies in the sandbox's own /proc", false},
		{"unreadable by the sandbox uid", private, "needs o+rx", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Getuid() != 0 {
				t.Skip("the sandbox uid is this user's when not root")
			}
			_, err := linuxsandbox.New(backend.Config{ReadOnly: []string{tt.dir}})
			if err == nil || !strings.Contains(err.Error(), "--sandbox-ro "+tt.dir) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New(ReadOnly %q) = %v, want an error naming --sandbox-ro and %q", tt.dir, err, tt.want)
			}
			if got, want := job.CodeOf(err), job.CodeBackendSetupFailed; got != want {
				t.Errorf("New(ReadOnly %q) code = %q, want %q", tt.dir, got, want)
			}
		})
	}
	if _, err := linuxsandbox.New(backend.Config{Path: []string{"bin"}}); err == nil || !strings.Contains(err.Error(), "--sandbox-path") {
		t.Errorf("New(Path bin) = %v, want an error naming --sandbox-path", err)
	}
	if _, err := linuxsandbox.New(backend.Config{Masked: []string{"etc/passwd"}}); err == nil || !strings.Contains(err.Error(), "etc/passwd") {
		t.Errorf("New(Masked etc/passwd) = %v, want an error naming the relative path", err)
	}
	if got, want := strings.Join(newSandbox(t, backend.Config{}).View().Path, ":"), "/usr/local/bin:/usr/bin:/bin"; got != want {
		t.Errorf("default View().Path = %q, want %q", got, want)
	}
}

// Regression: a read-only directory under /etc was bound after the masks
// and uncovered the secrets below it.
func TestMasksHoldUnderReadOnlyDirs(t *testing.T) {
	b := sandbox(t)
	if _, err := os.Stat("/etc/ssl/private"); err != nil {
		t.Skip("no /etc/ssl/private on this host")
	}
	spec, out, _ := backendtest.Spec(t, "/bin/ls", "-A", "/etc/ssl/private")
	spec.ReadOnly = []string{"/etc/ssl"}
	o, err := b.Run(context.Background(), spec)
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 || out.String() != "" {
		t.Errorf("/etc/ssl/private under a read-only /etc/ssl: %q %+v %v, want an empty masked directory", out.String(), o, err)
	}
}

// Regression: a store under a 0700 parent failed setup ("not searchable
// by others"): a root runner's sandbox uid cannot search it. The job's
// directories now reach the sandbox as mounts the runner made.
func TestStoreUnderPrivateParent(t *testing.T) {
	b := sandbox(t)
	store := privateDir(t)
	ws := filepath.Join(store, "copy")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "in.txt"), []byte("copy\n"), 0o644)
	ro, rw := filepath.Join(store, "ro"), filepath.Join(store, "rw")
	os.Mkdir(ro, 0o755)
	os.Mkdir(rw, 0o755)
	os.Chmod(rw, 0o777)
	os.WriteFile(filepath.Join(ro, "r.txt"), []byte("ro\n"), 0o644)
	sock := filepath.Join(store, "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(sock, 0o666) // as egress.Bridge makes it
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("gateway\n"))
			c.Close()
		}
	}()
	script := `import socket
print(open("in.txt").read() + open("` + ro + `/r.txt").read(), end="")
open("` + rw + `/w.txt", "w").write("rw")
open("out.txt", "w").write("out")
s = socket.create_connection(("127.0.0.1", 3128))
print(s.recv(100).decode(), end="")`
	spec, out, errb := backendtest.Spec(t, "/usr/bin/python3", "-c", script)
	spec.Workspace = backend.Workspace{Dir: ws}
	spec.ReadOnly, spec.Writable = []string{ro}, []string{rw}
	spec.Network, spec.Egress = job.NetworkAllowlist, &backend.Egress{Socket: sock}
	o, err := b.Run(context.Background(), spec)
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("job with its store under a 0700 parent: %v %+v %s", err, o, errb.String())
	}
	if got, want := out.String(), "copy\nro\ngateway\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	for _, f := range []string{filepath.Join(rw, "w.txt"), filepath.Join(ws, "out.txt")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("the job's write did not land: %v", err)
		}
	}

	// An overlay snapshot there too: upper and work under the private
	// parent, the lower layer as before.
	job := filepath.Join(store, "job")
	ows := backend.Workspace{Dir: filepath.Join(job, "merged"), Lower: filepath.Join(store, "layer", "tree"), Upper: filepath.Join(job, "overlay", "upper"), Work: filepath.Join(job, "overlay", "work")}
	for _, d := range []string{ows.Dir, ows.Lower, ows.Upper, ows.Work} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(ows.Lower, "base.txt"), []byte("base\n"), 0o644)
	spec, out, errb = backendtest.Spec(t, "/bin/sh", "-c", "cat base.txt && echo new > new.txt")
	spec.Workspace = ows
	if o, err := b.Run(context.Background(), spec); err != nil || o.ExitCode == nil || *o.ExitCode != 0 || out.String() != "base\n" {
		t.Fatalf("overlay job under a 0700 parent: %v %+v %q %s", err, o, out.String(), errb.String())
	}
	if _, err := os.Stat(filepath.Join(ows.Upper, "new.txt")); err != nil {
		t.Errorf("the overlay's write did not land in the upper layer: %v", err)
	}
}
