package policy

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// carriesShell reports whether the program exe, named name on the command
// line, runs a shell: it is one, or it is busybox named as a shell
// applet, or, with anyApplet (a program others may exec under any name
// and arguments), busybox at all.
func carriesShell(exe, name string, anyApplet bool) bool {
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return false
	}
	base := filepath.Base(real)
	return IsShell(base) || base == "busybox" && (anyApplet || IsShell(filepath.Base(name)))
}

// executables resolves policy.allowed_commands for exec_scope
// every_process: the absolute host path of each rule's program, found as
// the command line's own are (a pinned path, else the sandbox's PATH or
// the search path, a pinned digest checked on that file), beside ran, the
// programs the command line itself resolved to (pinned gets the identity
// of each file whose digest was checked). Without allow_shell, a
// shell, or busybox (whose callers can name its sh applet), is left out.
// A rule that resolves to nothing grants nothing; the messages say which
// and why.
func executables(p job.Policy, cfg Config, ran []string, pinned map[string]backend.FileIdentity) ([]string, []string) {
	out := slices.Clone(ran)
	var msgs []string
	seen := map[string]bool{}
	for _, r := range p.AllowedCommands {
		if seen[r.Basename] {
			continue // the first rule for a basename wins, as on the command line
		}
		seen[r.Basename] = true
		exe, err := resolve(r.Basename, r, cfg, pinned)
		switch {
		case err != nil:
			msgs = append(msgs, fmt.Sprintf("exec_scope every_process: allowed command %q is not executable in the job: %s", r.Basename, err.Message))
			continue
		case exe == "":
			continue
		case !p.AllowShell && carriesShell(exe, r.Basename, true):
			msgs = append(msgs, fmt.Sprintf("exec_scope every_process: allowed command %q (%s) runs a shell and allow_shell is false: not executable in the job", r.Basename, exe))
			continue
		}
		out = append(out, exe)
	}
	slices.Sort(out)
	return slices.Compact(out), msgs
}
