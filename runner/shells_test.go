package runner_test

import (
	"slices"
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

// TestLocalProcessShellsNotEnforced: local_process checks only the
// command line for shells, so a job under allow_shell false lists
// shells as not enforced; one that allows shells does not mention them.
func TestLocalProcessShellsNotEnforced(t *testing.T) {
	f := newFixture(t, nil)
	for _, allowShell := range []bool{false, true} {
		req := f.request([]string{"true"}, "true")
		req.Policy.AllowShell = allowShell
		res := f.run(req)
		if res.Status != job.StatusCompleted {
			t.Fatalf("allow_shell %v: status %s (%v)", allowShell, res.Status, res.Error)
		}
		if got := slices.Contains(res.Enforcement.NotEnforced, job.LimitShells); got == allowShell {
			t.Errorf("allow_shell %v: shells in not_enforced %q = %v, want %v", allowShell, res.Enforcement.NotEnforced, got, !allowShell)
		}
		if slices.Contains(res.Enforcement.Enforced, job.LimitShells) || len(res.ExecDenials) != 0 {
			t.Errorf("allow_shell %v: enforced %q, denials %+v", allowShell, res.Enforcement.Enforced, res.ExecDenials)
		}
	}
}
