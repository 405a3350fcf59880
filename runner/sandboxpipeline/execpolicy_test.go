package sandboxpipeline_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/docs/schemas"
	"github.com/agent-runner/agent-runner/job"
)

// TestShellDeniedAtEveryExec runs, through the whole pipeline on
// linux_sandbox, the programs that reach a shell past a policy whose
// command line holds none: with allow_shell false (and the default
// exec_scope argv0) the allowed program runs, the shell it starts is
// refused by the kernel, id never runs, and result.exec_denials names
// the shell; with allow_shell true the same job reaches id.
func TestShellDeniedAtEveryExec(t *testing.T) {
	r, ws := rootSandboxRunner(t, job.LimitShells, nil)
	tests := []struct {
		name    string
		argv    []string
		allowed string
	}{
		{"find -exec sh", []string{"find", ".", "-maxdepth", "0", "-exec", "sh", "-c", "id", ";"}, "find"},
		{"git alias !sh", []string{"git", "-c", "alias.x=!sh -c id", "x"}, "git"},
		{"awk system()", []string{"awk", `BEGIN{system("id")}`}, "awk"},
		{"python3 os.system", []string{"python3", "-c", "import os; print('python ran'); os.system('id')"}, "python3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := exec.LookPath(tt.allowed); err != nil {
				t.Skipf("%s is not installed here", tt.allowed)
			}
			req := job.Request{
				Workspace: job.Workspace{Path: ws},
				Command:   job.Command{Argv: tt.argv},
				Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: tt.allowed}}},
				Limits:    job.Limits{TimeoutMS: 60_000},
			}
			res := run(t, r, req)
			out := res.Stdout.Text + res.Stderr.Text
			if strings.Contains(out, "uid=") {
				t.Errorf("allow_shell false: %q reached a shell and id ran: %s", tt.argv, out)
			}
			if res.Status == job.StatusPolicyDenied || res.Status == job.StatusBackendUnavailable {
				t.Errorf("status = %s (%+v), want the job to run and its shell to be refused inside", res.Status, res.Error)
			}
			if tt.allowed == "python3" && !strings.Contains(res.Stdout.Text, "python ran") {
				t.Errorf("python3 itself did not run: %s", out)
			}
			if res.Enforcement == nil || !slices.Contains(res.Enforcement.Enforced, job.LimitShells) {
				t.Errorf("enforcement = %+v, want %q enforced", res.Enforcement, job.LimitShells)
			}
			shell := slices.IndexFunc(res.ExecDenials, func(d job.ExecDenial) bool { return filepath.Base(d.Path) == "sh" })
			if shell < 0 || res.ExecDenialsTotal < len(res.ExecDenials) {
				t.Fatalf("exec_denials = %+v (total %d), want the shell's", res.ExecDenials, res.ExecDenialsTotal)
			}
			if d := res.ExecDenials[shell]; d.PID == 0 || d.Time.IsZero() {
				t.Errorf("denial %+v lacks its pid or time", d)
			}
			if b, _ := json.Marshal(res); schemas.ValidateResult(b) != nil {
				t.Errorf("result with exec_denials does not match the result schema: %v\n%s", schemas.ValidateResult(b), b)
			}

			req.Policy.AllowShell = true
			res = run(t, r, req)
			if !strings.Contains(res.Stdout.Text, "uid=") || len(res.ExecDenials) != 0 {
				t.Errorf("allow_shell true: %q did not reach id (status %s, denials %+v): %s", tt.argv, res.Status, res.ExecDenials, res.Stdout.Text+res.Stderr.Text)
			}
			if slices.Contains(res.Enforcement.Enforced, job.LimitShells) || slices.Contains(res.Enforcement.NotEnforced, job.LimitShells) {
				t.Errorf("allow_shell true: enforcement %+v lists %q", res.Enforcement, job.LimitShells)
			}
		})
	}
}

// TestExecScopeRecordsDenials: under exec_scope every_process an exec
// off the list is refused and recorded like a shell: find's -exec of id,
// which allow_shell does not concern, is in exec_denials.
func TestExecScopeRecordsDenials(t *testing.T) {
	r, ws := rootSandboxRunner(t, job.LimitLandlock, nil)
	if _, err := exec.LookPath("find"); err != nil {
		t.Skip("find is not installed here")
	}
	req := job.Request{
		Workspace: job.Workspace{Path: ws},
		Command:   job.Command{Argv: []string{"find", ".", "-maxdepth", "0", "-exec", "/usr/bin/id", ";"}},
		Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: "find"}}, ExecScope: job.ExecScopeEveryProcess},
		Limits:    job.Limits{TimeoutMS: 60_000},
	}
	res := run(t, r, req)
	if strings.Contains(res.Stdout.Text, "uid=") {
		t.Errorf("id ran under every_process: %s", res.Stdout.Text)
	}
	if len(res.ExecDenials) != 1 || res.ExecDenials[0].Path != "/usr/bin/id" || res.ExecDenials[0].Argv0 != "/usr/bin/id" || res.ExecDenialsTotal != 1 {
		t.Errorf("exec_denials = %+v (total %d), want /usr/bin/id once", res.ExecDenials, res.ExecDenialsTotal)
	}
}
