package agentstep

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"slices"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
)

// BaseEnv is the environment every process of a task's sandbox on b
// starts with: the runner's variables (PATH is SearchPath(b), HOME is
// home, see PrepareHome) and the manifest's agent.env, sorted by name.
// Secrets, the task token and the children socket are added by the
// caller.
func BaseEnv(t *manifest.Task, home string, b backend.Backend) []string {
	env := []string{"PATH=" + SearchPath(b), "HOME=" + home, "LANG=C.UTF-8", "TASK_ID=" + t.Metadata.ID}
	if t.Agent != nil {
		for _, k := range slices.Sorted(maps.Keys(t.Agent.Env)) {
			env = append(env, k+"="+t.Agent.Env[k])
		}
	}
	return env
}

// SandboxHome is HOME on an isolating backend: the sandbox's own /tmp, a
// tmpfs that each sandbox mounts fresh and that goes with it.
const SandboxHome = "/tmp"

// PrepareHome returns the HOME of a task's processes on b, so that no two
// tasks share one (an agent's settings, hooks and session files in
// ~/.claude would otherwise reach the next task). An isolating backend
// gets SandboxHome, private to each sandbox. Anything else runs as the
// runner's user on the host, whose /tmp all tasks share: there HOME is
// l.Home() (<task>/home), created 0700 for the runner's user, kept for the
// task's later runs (`task shell`) and removed with the workspace.
func PrepareHome(l stage.Layout, b backend.Backend) (string, error) {
	if b.Capabilities().Isolating {
		return SandboxHome, nil
	}
	dir := l.Home()
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", job.Wrap(job.CodeRunIOFailed, err, "cannot create the task's home directory")
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return "", job.Errorf(job.CodeRunIOFailed, "the task's home %s is not a directory", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", job.Wrap(job.CodeRunIOFailed, err, "cannot make the task's home private")
	}
	return dir, nil
}

// SharesSandbox reports whether a task's steps can run in one sandbox
// (OpenSandbox) on b under the operator's task policy pol (nil:
// policy.Smallest): b keeps sandboxes, and pol confines no exec for the
// whole sandbox (allow_shell false and exec_scope every_process hold for
// every process of a sandbox, and the patch collection needs its shell
// and git). Otherwise each step runs in a sandbox of its own.
func SharesSandbox(b backend.Backend, pol *job.Policy) bool {
	if _, ok := b.(backend.Sandboxes); !ok {
		return false
	}
	return pol == nil || (pol.AllowShell && pol.ExecScope != job.ExecScopeEveryProcess)
}

// OpenSandbox opens the task's sandbox on cfg.Backend through the run
// service r (runner.StepID(task_id, "sandbox")): the inbox in place,
// the agent's limits (vm.memory, vm.cpus, 4096 processes, a 1 GiB /tmp;
// the task's timeout is each step's own), cfg.Network with cfg.Egress
// and vm.allowed_hosts, cfg.Mounts and readOnly visible read-only and
// writable writable, at their host paths. Its steps run in it with
// Config.Sandbox; the caller closes it.
func OpenSandbox(ctx context.Context, r *runner.Runner, l stage.Layout, t *manifest.Task, cfg Config, readOnly, writable []string) (*runner.Sandbox, error) {
	spec := runner.SandboxSpec{
		ID:        runner.StepID(t.Metadata.ID, "sandbox"),
		Backend:   cfg.Backend,
		Workspace: l.Inbox(),
		ReadOnly:  append(slices.Clone(cfg.Mounts), readOnly...),
		Writable:  writable,
		Network:   cfg.Network,
		Egress:    cfg.Egress,
		Limits:    stepLimits(t),
	}
	if spec.Network == job.NetworkAllowlist {
		spec.AllowedHosts = t.VM.AllowedHosts
	}
	return r.OpenSandbox(ctx, spec)
}
