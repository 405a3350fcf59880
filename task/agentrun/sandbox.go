package agentrun

import (
	"path/filepath"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
)

// BaseEnv is the environment every process of a task's sandbox starts
// with (secrets and extras are added by the caller).
func BaseEnv(t *manifest.Task) []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "TASK_ID=" + t.Metadata.ID}
}

// SandboxSpec is the sandbox a task's processes run in: the inbox as the
// writable workspace, the repository subpath as the working directory, no
// network, and vm.cpus and vm.memory as enforced limits. The agent run and
// `agent-runner task shell` both start from it, so a shell over a
// preserved workspace gets the agent's sandbox. argv[0] must be absolute.
func SandboxSpec(l stage.Layout, t *manifest.Task, argv, env []string) backend.Spec {
	cwd := "."
	if t.Repository.Subpath != "" {
		cwd = filepath.ToSlash(filepath.Clean(t.Repository.Subpath))
	}
	return backend.Spec{
		JobID:     t.Metadata.ID,
		Argv:      argv,
		Env:       env,
		Workspace: backend.Workspace{Dir: l.Inbox()},
		Cwd:       cwd,
		Network:   job.NetworkDisabled,
		Limits: backend.Limits{
			Timeout:      t.Timeout(),
			MemoryBytes:  t.MemoryBytes(),
			CPUCount:     float64(t.VM.CPUs),
			MaxProcesses: 4096,
			TmpBytes:     1 << 30,
		},
	}
}
