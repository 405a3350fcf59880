package policy

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

// TestDecideDeniedPrograms: a policy without allow_shell hands the
// backend every shell name (and busybox) to refuse at every exec, under
// either exec scope; with allow_shell it hands none.
func TestDecideDeniedPrograms(t *testing.T) {
	tests := []struct {
		name       string
		allowShell bool
		scope      string
		want       []string
	}{
		{"allow_shell false, argv0 by default", false, "", ShellPrograms()},
		{"allow_shell false, argv0", false, job.ExecScopeArgv0, ShellPrograms()},
		{"allow_shell false, every_process", false, job.ExecScopeEveryProcess, ShellPrograms()},
		{"allow_shell true", true, "", nil},
	}
	for _, tt := range tests {
		r := req([]string{"/usr/bin/find", "."}, names("find")...)
		r.Policy.AllowShell, r.Policy.ExecScope = tt.allowShell, tt.scope
		d, err := Decide(r, Config{})
		if err != nil {
			t.Fatalf("%s: Decide: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, d.DeniedPrograms); diff != "" {
			t.Errorf("%s: DeniedPrograms (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestShellPrograms(t *testing.T) {
	got := ShellPrograms()
	for _, want := range []string{"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "fish", "csh", "tcsh", "busybox"} {
		if !slices.Contains(got, want) {
			t.Errorf("ShellPrograms() = %q, want it to hold %q", got, want)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("ShellPrograms() = %q, want it sorted", got)
	}
	for _, p := range got {
		if p != "busybox" && !IsShell(p) {
			t.Errorf("ShellPrograms() holds %q, which IsShell does not know", p)
		}
	}
}
