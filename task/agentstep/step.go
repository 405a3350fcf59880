package agentstep

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/policy"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
)

// StepRequest is the run-service request of a process in a task's
// sandbox (the agent, `agent-runner task shell`): the inbox as the
// workspace (a step runs in it in place), the repository subpath as the
// working directory, env ("KEY=value", never a secret: the request is
// recorded) as command.env, no network, the task's timeout, vm.cpus and
// vm.memory, 4096 processes and a 1 GiB /tmp as limits, and pol. argv[0]
// must be absolute.
func StepRequest(l stage.Layout, t *manifest.Task, id string, argv, env []string, pol job.Policy) job.Request {
	cwd := "."
	if t.Repository.Subpath != "" {
		cwd = filepath.ToSlash(filepath.Clean(t.Repository.Subpath))
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	if pol.Network == "" {
		pol.Network = job.NetworkDisabled
	}
	return job.Request{
		JobID:     id,
		Workspace: job.Workspace{Path: l.Inbox()},
		Command:   job.Command{Argv: argv, Cwd: cwd, Env: vars},
		Policy:    pol,
		Limits:    stepLimits(t),
	}
}

// stepLimits are the limits of a task's process (StepRequest) and of its
// sandbox (OpenSandbox): the task's timeout, vm.cpus and vm.memory, 4096
// processes and a 1 GiB /tmp.
func stepLimits(t *manifest.Task) job.Limits {
	return job.Limits{
		TimeoutMS:    t.Timeout().Milliseconds(),
		MemoryMB:     stage.MemoryMB(t.MemoryBytes()),
		CPUCount:     int64(t.VM.CPUs),
		MaxProcesses: 4096,
		TmpMB:        1024,
	}
}

// agentRequest is the agent step's request (runs/<task_id>.agent): argv
// with its resolved program, env, and the task's policy with its network.
func agentRequest(l stage.Layout, t *manifest.Task, argv, env []string, network string, cfg Config) job.Request {
	pol := StepPolicy(cfg.Policy, argv, env, ownKeys(t, env), cfg.Backend)
	pol.Network = network
	if network == job.NetworkAllowlist {
		pol.AllowedHosts = t.VM.AllowedHosts
	}
	return StepRequest(l, t, runner.StepID(t.Metadata.ID, "agent"), argv, env, pol)
}

// StepPolicy is the policy a task's process runs under. With the
// operator's task policy (serve's --task-policy), its allowed_commands,
// allow_shell and exec_scope decide, and its allowed_env governs the
// manifest's agent.env; the variables the runner sets itself (own: PATH,
// HOME, LANG, TASK_ID, the children socket, TERM) are always allowed.
// Without one it is policy.Smallest: the smallest policy under which the
// task's own command runs, so every task runs as it did before tasks were
// held to a policy. Network fields are the caller's.
func StepPolicy(operator *job.Policy, argv []string, env []string, own []string, b backend.Backend) job.Policy {
	if operator == nil {
		return policy.Smallest(argv, env, b)
	}
	p := *operator
	p.AllowedCommands = slices.Clone(operator.AllowedCommands)
	p.AllowedEnv = slices.Clone(operator.AllowedEnv)
	for _, k := range own {
		if !slices.Contains(p.AllowedEnv, k) {
			p.AllowedEnv = append(p.AllowedEnv, k)
		}
	}
	return p
}

// envKeys are the names of env ("KEY=value").
func envKeys(env []string) []string {
	keys := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	return keys
}

// ownKeys are the names in env the runner sets itself, agent.env's aside.
func ownKeys(t *manifest.Task, env []string) []string {
	var own []string
	for _, k := range envKeys(env) {
		if t.Agent == nil || !hasKey(t.Agent.Env, k) {
			own = append(own, k)
		}
	}
	return own
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
