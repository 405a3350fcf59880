package backendtest

import (
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// execAttack is a python3 program that tries to execute what an exec
// allow-list of python3 alone must refuse: the view's shell, another
// program of the view, the shell copied to /tmp and to the workspace (if
// it can be read at all), and the view's shell and the copy in /tmp
// through the ELF interpreter (which maps a program instead of executing
// it). It prints one line per try: "<what> ran" or "<what> errno N"; what
// did run prints "uid=".
const execAttack = `
import glob, os, shutil, subprocess
ld = sorted(glob.glob("/lib64/ld-linux*.so*") + glob.glob("/lib/ld-linux*.so*") + glob.glob("/lib/ld-musl*.so*"))[0]
for dst in ("/tmp/sh", "copied-sh"):
    try:
        shutil.copy("/bin/sh", dst); os.chmod(dst, 0o755)
    except OSError as e:
        print("copy", dst, "errno", e.errno)
for what, argv in [("view-shell", ["/bin/sh", "-c", "echo uid=shell"]),
                   ("view-program", ["/usr/bin/id"]),
                   ("tmp-shell", ["/tmp/sh", "-c", "echo uid=tmp"]),
                   ("workspace-shell", ["./copied-sh", "-c", "echo uid=workspace"]),
                   ("view-shell-through-ld.so", [ld, "/bin/sh", "-c", "echo uid=ld.so.view"]),
                   ("tmp-shell-through-ld.so", [ld, "/tmp/sh", "-c", "echo uid=ld.so"])]:
    try:
        subprocess.run(argv, check=False)
        print(what, "ran")
    except OSError as e:
        print(what, "errno", e.errno)
`

// advExecOnlyTheAllowList: with Spec.Executables (policy.exec_scope
// every_process) the workload executes nothing but the listed programs:
// a program it starts itself, from the view or copied somewhere
// writable, fails with EACCES, nothing written runs through the ELF
// interpreter either, while the listed, dynamically linked python3 runs.
// Without the list the same program runs them all.
func advExecOnlyTheAllowList(t *testing.T, newBackend Factory) {
	b := newBackend(t)
	NeedLimit(t, b, job.LimitLandlock)
	out, errs, o := Attack(t, b, execAttack, func(s *backend.Spec) { s.Executables = []string{"/usr/bin/python3"} })
	for _, what := range []string{"view-shell", "view-program"} {
		if !strings.Contains(out, what+" errno 13") {
			t.Errorf("exec allow-list of python3: %s was not refused with EACCES:\nstdout %s\nstderr %s\n%+v", what, out, errs, o)
		}
	}
	// The view's programs cannot even be read (the loader would run
	// them), so no copy exists to try.
	if !strings.Contains(out, "copy /tmp/sh errno 13") {
		t.Errorf("exec allow-list of python3: the view's shell could be read and copied:\nstdout %s\nstderr %s", out, errs)
	}
	if strings.Contains(out+errs, "uid=") {
		t.Errorf("a program off the allow-list ran: %s", out)
	}

	out, errs, o = Attack(t, newBackend(t), execAttack)
	if !strings.Contains(out, "uid=ld.so") {
		t.Errorf("without an allow-list the copied shell did not run through the ELF interpreter:\nstdout %s\nstderr %s", out, errs)
	}
	for _, what := range []string{"view-shell", "view-program", "tmp-shell", "workspace-shell"} {
		if !strings.Contains(out, what+" ran") {
			t.Errorf("without an allow-list %s did not run (the mode must be opt-in):\nstdout %s\nstderr %s\n%+v", what, out, errs, o)
		}
	}
}
