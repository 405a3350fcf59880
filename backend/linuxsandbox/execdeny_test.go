package linuxsandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/policy"
)

// shellAttack tries every way to a shell a python3 program has: the
// view's shells by path and through os.system, a script whose #! is a
// shell, a copy of the shell in /tmp, the shell through the ELF
// interpreter, and a program that is no shell (id), which must run. Each
// shell that runs prints "SHELL-RAN".
const shellAttack = `
import glob, os, shutil, subprocess
ld = sorted(glob.glob("/lib64/ld-linux*.so*") + glob.glob("/lib/ld-linux*.so*"))[0]
open("s.sh", "w").write("#!/bin/sh\necho SHELL-RAN script\n"); os.chmod("s.sh", 0o755)
try:
    shutil.copy("/bin/sh", "/tmp/sh"); os.chmod("/tmp/sh", 0o755)
except OSError as e:
    print("copy errno", e.errno)
for what, argv in [("sh", ["/bin/sh", "-c", "echo SHELL-RAN sh"]),
                   ("bash", ["bash", "-c", "echo SHELL-RAN bash"]),
                   ("script", ["./s.sh"]),
                   ("tmp-sh", ["/tmp/sh", "-c", "echo SHELL-RAN tmp"]),
                   ("ld.so-sh", [ld, "/bin/sh", "-c", "echo SHELL-RAN ld.so"]),
                   ("id", ["/usr/bin/id", "-u"])]:
    try:
        subprocess.run(argv, check=False)
        print(what, "ran")
    except OSError as e:
        print(what, "errno", e.errno)
print("system", os.system("echo SHELL-RAN system"))
`

// TestDeniedShells: with Spec.DeniedPrograms (policy.allow_shell false)
// no process of the job executes or reads a shell, however it names one,
// while other programs run; each refused exec is in Outcome.ExecDenials.
// Without the list the same program reaches every shell.
func TestDeniedShells(t *testing.T) {
	b := sandbox(t)
	backendtest.NeedLimit(t, b, job.LimitShells)
	env := []string{"PATH=/usr/bin:/bin"}
	out, errs, o := backendtest.Attack(t, b, shellAttack, func(s *backend.Spec) {
		s.DeniedPrograms, s.Env = policy.ShellPrograms(), env
	})
	if strings.Contains(out+errs, "SHELL-RAN") {
		t.Errorf("a shell ran under DeniedPrograms:\nstdout %s\nstderr %s", out, errs)
	}
	for _, want := range []string{"sh errno 13", "bash errno 13", "script errno 13", "copy errno 13", "id ran"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\nstdout %s\nstderr %s", want, out, errs)
		}
	}
	if !slices.Contains(o.Enforced, job.LimitShells) {
		t.Errorf("enforced = %q, want it to list %q", o.Enforced, job.LimitShells)
	}
	// os.system runs /bin/sh, by a path of its own.
	paths := map[string]job.ExecDenial{}
	for _, d := range o.ExecDenials {
		paths[d.Path] = d
	}
	for _, want := range []string{"/bin/sh", "/workspace/s.sh"} {
		if _, ok := paths[want]; !ok {
			t.Errorf("exec denials %+v lack %s", o.ExecDenials, want)
		}
	}
	if d := paths["/workspace/s.sh"]; d.Interpreter != "/bin/sh" || d.Argv0 != "./s.sh" || d.PID < 2 || d.Time.IsZero() {
		t.Errorf("the script's denial = %+v, want interpreter /bin/sh, argv0 ./s.sh, a pid and a time", d)
	}
	if _, ok := paths["/usr/bin/id"]; ok {
		t.Errorf("id, which ran, is recorded as denied: %+v", o.ExecDenials)
	}
	if o.ExecDenialsTotal != len(o.ExecDenials) || o.ExecDenialsTotal < 4 {
		t.Errorf("exec denials total %d for %d recorded, want at least 4 (sh, bash, script, system)", o.ExecDenialsTotal, len(o.ExecDenials))
	}

	out, errs, o = backendtest.Attack(t, sandbox(t), shellAttack, func(s *backend.Spec) { s.Env = env })
	for _, want := range []string{"SHELL-RAN sh", "SHELL-RAN bash", "SHELL-RAN script", "SHELL-RAN tmp", "SHELL-RAN ld.so", "SHELL-RAN system"} {
		if !strings.Contains(out, want) {
			t.Errorf("without DeniedPrograms %q is missing (the denial must be the policy's, not the sandbox's):\nstdout %s\nstderr %s", want, out, errs)
		}
	}
	if len(o.ExecDenials) != 0 || slices.Contains(o.Enforced, job.LimitShells) {
		t.Errorf("without DeniedPrograms: denials %+v, enforced %q", o.ExecDenials, o.Enforced)
	}
}

// TestDeniedShellsInKeptSandbox: in a kept sandbox each Exec's outcome
// carries the refused execs of its own process group, and only those.
func TestDeniedShellsInKeptSandbox(t *testing.T) {
	b := sandbox(t)
	backendtest.NeedLimit(t, b, job.LimitShells)
	spec, _, _ := backendtest.Spec(t, "/bin/true")
	spec.DeniedPrograms = policy.ShellPrograms()
	ctx := context.Background()
	s, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Delete(ctx)
	var stdout strings.Builder
	o, err := s.Exec(ctx, backend.Exec{Argv: []string{"/usr/bin/python3", "-c", "import os; print(os.system('echo SHELL-RAN'))"}, Stdout: &stdout})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stdout.String(), "SHELL-RAN") || len(o.ExecDenials) != 1 || o.ExecDenials[0].Path != "/bin/sh" || o.ExecDenialsTotal != 1 {
		t.Errorf("exec of os.system: stdout %q, denials %+v (total %d), want /bin/sh refused once", stdout.String(), o.ExecDenials, o.ExecDenialsTotal)
	}
	o, err = s.Exec(ctx, backend.Exec{Argv: []string{"/usr/bin/id", "-u"}})
	if err != nil || len(o.ExecDenials) != 0 || o.ExecDenialsTotal != 0 {
		t.Errorf("a later exec that refused nothing: denials %+v (total %d), err %v, want none", o.ExecDenials, o.ExecDenialsTotal, err)
	}
}

// TestPinnedExecutableIsTheFileGranted: under an exec allow-list, a
// pinned program is granted only while it is the file the policy hashed
// (Spec.Pinned): the same path renamed over by another file (a package
// upgrade, or someone racing the job) fails the sandbox's setup instead
// of granting the new file.
func TestPinnedExecutableIsTheFileGranted(t *testing.T) {
	b := sandbox(t)
	backendtest.NeedLimit(t, b, job.LimitLandlock)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		os.Chmod(d, 0o755)
	}
	prog := filepath.Join(dir, "prog")
	install := func() backend.FileIdentity {
		data, err := os.ReadFile("/usr/bin/id")
		if err != nil {
			t.Skipf("no /usr/bin/id to copy: %v", err)
		}
		if err := os.WriteFile(prog+".new", data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(prog+".new", prog); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(prog, &st); err != nil {
			t.Fatal(err)
		}
		return backend.FileIdentity{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano()}
	}
	hashed := install()
	run := func() (string, backend.Outcome, error) {
		spec, out, _ := backendtest.Spec(t, prog, "-u")
		spec.ReadOnly, spec.Executables = []string{dir}, []string{prog}
		spec.Pinned = map[string]backend.FileIdentity{prog: hashed}
		o, err := b.Run(context.Background(), spec)
		return out.String(), o, err
	}
	if out, o, err := run(); err != nil || o.ExitCode == nil || *o.ExitCode != 0 || out == "" {
		t.Fatalf("the pinned file itself: %q %+v %v, want it to run", out, o, err)
	}
	install()
	out, o, err := run()
	if err == nil || job.CodeOf(err) != job.CodeBackendSetupFailed || !strings.Contains(err.Error(), "pinned") {
		t.Errorf("a file renamed over the pinned one: %q %+v, err %v, want %s naming the pinned file", out, o, err, job.CodeBackendSetupFailed)
	}
	if out != "" {
		t.Errorf("the replaced program ran: %q", out)
	}
}
