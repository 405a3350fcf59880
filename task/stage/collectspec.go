package stage

import (
	"maps"
	"slices"
	"strconv"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/manifest"
)

// collectScript runs in the collection sandbox with the inbox as its
// working directory (the workspace root: /workspace in linux_sandbox, the
// inbox's host path in local_process). $1 is base.git (read-only), $2 the
// scratch directory (writable), $3 the cap in bytes (every file it writes
// may grow one 512-byte block past it, so the host sees an overrun, and a
// new file over it fails the collection, with exit status 3, before git
// reads it), $4 git's
// address space in KiB (a modified file too big to map fails).
//
// Git reads only the work tree's files: the repository is base.git, the
// index and any object it writes go to the scratch directory, and the
// inbox's .git is never opened. Every command git could take from config
// or attributes is switched off or ignored; --ignore-submodules=dirty
// keeps git from running `git status` inside a nested repository (with
// that repository's config), which is how the same git on the host ran
// an agent's filter as root.
const collectScript = `set -eu
base=$1 out=$2
ulimit -c 0
ulimit -f $(($3 / 512 + 1))
ulimit -v "$4"
mkdir "$out/objects"
export GIT_DIR="$base" GIT_WORK_TREE="$PWD" GIT_INDEX_FILE="$out/index" \
	GIT_OBJECT_DIRECTORY="$out/objects" GIT_ALTERNATE_OBJECT_DIRECTORIES="$base/objects"
g() {
	git -c safe.directory="$base" -c core.hooksPath=/dev/null -c core.fsmonitor=false \
		-c core.untrackedCache=false -c core.attributesFile=/dev/null -c core.excludesFile=/dev/null \
		-c protocol.allow=never -c submodule.recurse=false -c advice.addEmbeddedRepo=false \
		-c core.preloadIndex=false -c index.threads=1 \
		-c core.packedGitWindowSize=32m -c core.packedGitLimit=256m "$@"
}
g read-tree refs/heads/base
g ls-files --others --exclude-standard -z >"$out/untracked"
if [ -s "$out/untracked" ]; then
	xargs -0 stat -c '%s %A %n' -- <"$out/untracked" | awk -v max="$3" '
		$1 > max && $2 ~ /^-/ { sub(/^[0-9]+ [^ ]+ /, ""); print "new file over the " max "-byte collection cap: " $0 >"/dev/stderr"; big = 1 }
		END { exit big * 3 }'
	g add --intent-to-add --pathspec-from-file="$out/untracked" --pathspec-file-nul
fi
g diff --binary --no-ext-diff --no-textconv --ignore-submodules=dirty refs/heads/base >"$out/patch"
`

// collectEnv is the collection's complete environment: no system,
// global or home configuration, literal pathspecs (a file named "*" is
// that file).
var collectEnv = map[string]string{
	"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent",
	"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1",
	"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_LITERAL_PATHSPECS": "1", "GIT_NO_REPLACE_OBJECTS": "1",
}

// collectRequest is the collection's run: the inbox as its workspace, in
// place (the backend hands it to the sandbox's uid, as for the agent),
// collectScript under /bin/sh, no network, and lim. Its policy is fixed,
// not the operator's task policy: it allows the shell and the
// environment the collection itself needs and nothing else. base.git
// (read-only) and the scratch directory (writable) are the run's
// Options.ReadOnly and Options.Writable, at their host paths.
func collectRequest(l Layout, t *manifest.Task, scratch string, lim CollectLimits) job.Request {
	keys := slices.Sorted(maps.Keys(collectEnv))
	return job.Request{
		JobID:     runner.StepID(t.Metadata.ID, "collect"),
		Workspace: job.Workspace{Path: l.Inbox()},
		Command: job.Command{
			Argv: []string{"/bin/sh", "-c", collectScript, "collect", l.Base(), scratch,
				strconv.FormatInt(lim.MaxBytes, 10), strconv.FormatInt(lim.MemoryBytes>>10, 10)},
			Cwd: ".",
			Env: maps.Clone(collectEnv),
		},
		Policy: job.Policy{AllowedCommands: []job.CommandRule{{Basename: "sh"}}, AllowShell: true, AllowedEnv: keys, Network: job.NetworkDisabled},
		Limits: job.Limits{
			TimeoutMS:    lim.Timeout.Milliseconds(),
			MemoryMB:     MemoryMB(lim.MemoryBytes),
			CPUCount:     1,
			MaxProcesses: 64,
			TmpMB:        64,
		},
	}
}
