package sandboxpipeline_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// execScopeRunner is a root runner on linux_sandbox with Landlock, or
// skips t saying why not.
func execScopeRunner(t *testing.T) (*runner.Runner, string) {
	t.Helper()
	for _, p := range []string{"find", "awk", "python3", "sh", "id"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed here", p)
		}
	}
	// Under every_process the view's shell cannot even be read (the ELF
	// interpreter would run it), so the copy is refused first.
	script := "import shutil, subprocess\n" +
		"print('python ran')\n" +
		"try:\n" +
		"    shutil.copy('/bin/sh', '/tmp/sh')\n" +
		"    shutil.copymode('/bin/sh', '/tmp/sh')\n" +
		"except OSError as e:\n" +
		"    print('copy errno', e.errno)\n" +
		"try:\n" +
		"    subprocess.run(['/tmp/sh', '-c', 'id'])\n" +
		"except OSError as e:\n" +
		"    print('tmp shell errno', e.errno)\n"
	return rootSandboxRunner(t, job.LimitLandlock, map[string]string{"copy.py": script})
}

// TestExecScope runs the programs that reach a shell past an argv[0]
// policy: under exec_scope every_process (and allow_shell false) the
// kernel refuses the shell (EACCES) while the allowed, dynamically
// linked program runs; under argv0 (and with no exec_scope) with
// allow_shell the shell runs: argv0 holds only the command line to the
// list (allow_shell false under argv0 is TestShellDeniedAtEveryExec).
func TestExecScope(t *testing.T) {
	r, ws := execScopeRunner(t)
	tests := []struct {
		name    string
		argv    []string
		allowed string
		// denied is what stdout or stderr says under every_process.
		denied string
	}{
		{"find -exec sh", []string{"find", ".", "-maxdepth", "0", "-exec", "sh", "-c", "id", ";"}, "find", "Permission denied"},
		{"awk system()", []string{"awk", `BEGIN{system("id")}`}, "awk", ""},
		{"python3 runs a shell copied to /tmp", []string{"python3", "copy.py"}, "python3", "copy errno 13"},
	}
	for _, tt := range tests {
		for _, scope := range []string{"", job.ExecScopeArgv0, job.ExecScopeEveryProcess} {
			name := scope
			if name == "" {
				name = "unset"
			}
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				req := job.Request{
					Workspace: job.Workspace{Path: ws},
					Command:   job.Command{Argv: tt.argv},
					Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: tt.allowed}}, ExecScope: scope},
					Limits:    job.Limits{TimeoutMS: 60_000},
				}
				req.Policy.AllowShell = scope != job.ExecScopeEveryProcess
				res := run(t, r, req)
				out := res.Stdout.Text + res.Stderr.Text
				if scope != job.ExecScopeEveryProcess {
					if !strings.Contains(res.Stdout.Text, "uid=") {
						t.Errorf("exec_scope %q: %q did not reach the shell as before (status %s): %s", scope, tt.argv, res.Status, out)
					}
					return
				}
				if strings.Contains(out, "uid=") {
					t.Errorf("exec_scope every_process: %q reached a shell: %s", tt.argv, out)
				}
				if !strings.Contains(out, tt.denied) {
					t.Errorf("exec_scope every_process: %q output = %q, want %q", tt.argv, out, tt.denied)
				}
				if tt.allowed == "python3" && !strings.Contains(res.Stdout.Text, "python ran") {
					t.Errorf("the allowed, dynamically linked python3 did not run: %s", out)
				}
				if res.Status == job.StatusBackendUnavailable || res.Status == job.StatusPolicyDenied {
					t.Errorf("status = %s, want the job to run and its exec to fail (%+v)", res.Status, res.Error)
				}
			})
		}
	}
}
