package validation

import (
	"slices"

	"github.com/agent-runner/agent-runner/job"
	shellpolicy "github.com/agent-runner/agent-runner/policy"
)

// execScope checks policy.exec_scope. Under "every_process" the backend
// lets the job execute only the programs allowed_commands resolve to, so
// the list may not be empty, and allow_shell means something only when a
// shell is on it: a request that allows shells but lists none would get
// none, and is refused rather than run differently than it reads.
func execScope(p *job.Policy) error {
	switch p.ExecScope {
	case "", job.ExecScopeArgv0:
		return nil
	case job.ExecScopeEveryProcess:
	default:
		return invalid("policy.exec_scope", `must be "argv0" or "every_process"`)
	}
	if len(p.AllowedCommands) == 0 {
		return invalid("policy.exec_scope", `"every_process" needs policy.allowed_commands: the only programs the job may execute`)
	}
	listsShell := slices.ContainsFunc(p.AllowedCommands, func(r job.CommandRule) bool { return shellpolicy.IsShell(r.Basename) })
	if p.AllowShell && !listsShell {
		return invalid("policy.allow_shell", `with exec_scope "every_process" only the shells in policy.allowed_commands may run: list them, or drop allow_shell`)
	}
	return nil
}
