package validation

import (
	"testing"

	"github.com/agent-runner/agent-runner/job"
)

func TestExecScope(t *testing.T) {
	rules := func(names ...string) []job.CommandRule {
		var out []job.CommandRule
		for _, n := range names {
			out = append(out, job.CommandRule{Basename: n})
		}
		return out
	}
	tests := []struct {
		name       string
		scope      string
		allowed    []job.CommandRule
		allowShell bool
		want       job.Code
	}{
		{"default", "", rules("true"), false, ""},
		{"argv0", job.ExecScopeArgv0, rules("true"), false, ""},
		{"argv0 with no commands", job.ExecScopeArgv0, nil, false, ""},
		{"every_process", job.ExecScopeEveryProcess, rules("find"), false, ""},
		{"every_process with no commands", job.ExecScopeEveryProcess, nil, false, job.CodeInvalidRequest},
		{"every_process allowing listed shells", job.ExecScopeEveryProcess, rules("python3", "sh"), true, ""},
		{"every_process allowing unlisted shells", job.ExecScopeEveryProcess, rules("python3"), true, job.CodeInvalidRequest},
		{"every_process listing a shell it denies", job.ExecScopeEveryProcess, rules("python3", "bash"), false, ""},
		{"argv0 allowing unlisted shells", job.ExecScopeArgv0, rules("python3"), true, ""},
		{"unknown scope", "children", rules("true"), false, job.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base(t)
			r.Policy.ExecScope, r.Policy.AllowedCommands, r.Policy.AllowShell = tt.scope, tt.allowed, tt.allowShell
			err := Request(&r, cfg)
			if got := job.CodeOf(err); got != tt.want {
				t.Errorf("Request(exec_scope %q, allowed %v, allow_shell %v) code = %q (%v), want %q",
					tt.scope, tt.allowed, tt.allowShell, got, err, tt.want)
			}
			if tt.want == "" && r.Policy.ExecScope != tt.scope {
				t.Errorf("exec_scope = %q after validation, want %q kept (an empty one stays empty: the policy version of today's requests does not change)", r.Policy.ExecScope, tt.scope)
			}
		})
	}
}
