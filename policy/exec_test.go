package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

func TestDecideExecutables(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bin")
	os.MkdirAll(bin, 0o755)
	for _, p := range []string{"tool", "other", "sh", "busybox"} {
		if err := os.WriteFile(filepath.Join(bin, p), []byte("\x7fELF"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	at := func(p string) string { return filepath.Join(bin, p) }
	cfg := Config{View: &backend.View{Roots: []string{bin}, Path: []string{bin}}}
	every := func(argv []string, allowShell bool, rules ...job.CommandRule) job.Request {
		r := req(argv, rules...)
		r.Policy.ExecScope, r.Policy.AllowShell = job.ExecScopeEveryProcess, allowShell
		return r
	}
	tests := []struct {
		name    string
		req     job.Request
		want    job.Code
		exec    []string
		message string
	}{
		{"argv0 resolves the command line only", req([]string{"tool"}, names("tool", "other")...), "", nil, ""},
		{"every allowed command", every([]string{"tool"}, false, names("tool", "other")...), "", []string{at("other"), at("tool")}, ""},
		{"a shell without allow_shell is left out", every([]string{"tool"}, false, names("tool", "sh")...), "", []string{at("tool")}, `allowed command "sh"`},
		{"a shell with allow_shell", every([]string{"tool"}, true, names("tool", "sh")...), "", []string{at("sh"), at("tool")}, ""},
		{"busybox without allow_shell is left out", every([]string{"tool"}, false, names("tool", "busybox")...), "", []string{at("tool")}, "runs a shell"},
		{"busybox on the command line without allow_shell", every([]string{"busybox", "ls"}, false, names("busybox", "ls")...), job.CodeShellDenied, nil, ""},
		{"a rule that resolves to nothing grants nothing", every([]string{"tool"}, false, names("tool", "no-such-program-xyz")...), "", []string{at("tool")}, "not executable in the job"},
		{"a digest that does not match grants nothing", every([]string{"tool"}, false, job.CommandRule{Basename: "tool"}, job.CommandRule{Basename: "other", SHA256: strings.Repeat("0", 64)}), "", []string{at("tool")}, "digest"},
		{"a pinned path", every([]string{"tool"}, false, job.CommandRule{Basename: "tool", Path: at("other")}), "", []string{at("other")}, ""},
		{"a program in the workspace", every([]string{"./run.sh"}, false, names("run.sh")...), job.CodeCommandDenied, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decide(tt.req, cfg)
			if got := codeOf(err); got != tt.want {
				t.Fatalf("Decide(%q) code = %q (%v), want %q", tt.req.Command.Argv, got, err, tt.want)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.exec, d.Executables); diff != "" {
				t.Errorf("Decide(%q) executables (-want +got):\n%s", tt.req.Command.Argv, diff)
			}
			if msgs := strings.Join(d.Messages, "\n"); !strings.Contains(msgs, tt.message) {
				t.Errorf("Decide(%q) messages = %q, want one containing %q", tt.req.Command.Argv, msgs, tt.message)
			}
		})
	}
}
