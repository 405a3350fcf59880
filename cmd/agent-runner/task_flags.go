package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/secretfile"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/taskstore"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// taskFlags are how serve and worker run agent tasks: the API node admits
// a task with them, the worker that takes it from the queue runs it with
// its own (its backend, secrets file and limits).
type taskFlags struct {
	backend     string
	allowHost   bool
	hang, beat  time.Duration
	secretsFile string
	policyFile  string
}

func (f *taskFlags) register(fs *pflag.FlagSet, door string) {
	fs.StringVar(&f.backend, "task-backend", "", "backend agent tasks run on (default: --default-backend); "+door+" refuses to start when it is unavailable")
	fs.BoolVar(&f.allowHost, "task-allow-host-network", false, "let tasks whose vm.network_mode needs egress use the host network")
	fs.DurationVar(&f.hang, "task-hang-timeout", 30*time.Minute, "end a task whose agent printed nothing for this long")
	fs.DurationVar(&f.beat, "task-heartbeat", 30*time.Second, "how often a running task's progress, CPU and memory are recorded (outbox/progress/metrics.jsonl)")
	fs.StringVar(&f.policyFile, "task-policy", "", "the policy every agent task's command must pass (a job policy in JSON or YAML: allowed_commands, allow_shell, allowed_env, exec_scope; see docs/tasks.md); default: each task's own command is allowed")
	fs.StringVar(&f.secretsFile, "secrets-file", "", "the only secrets agent tasks and kept sandboxes may name (YAML: secrets: {NAME: {env: VAR} | {file: PATH}}); without it a task asking for a secret is refused")
}

// taskDeps is what a task store needs from its door.
type taskDeps struct {
	StoreDir           string
	Backends           backend.Set
	DefaultBackend     string
	UnsafeLocalProcess bool
	Egress             *egress.Operator
	Roots              *workspaceroot.Roots
	Observer           state.Observer
	Logger             *slog.Logger // the lifecycle's (nil: discarded)
	// Runner is the run service the tasks' steps go through.
	Runner *runner.Runner
}

// store opens the task store under <store-dir>/tasks with the flags.
func (f *taskFlags) store(ctx context.Context, d taskDeps) (*taskstore.Store, error) {
	var secrets *secretfile.File
	if f.secretsFile != "" {
		var err error
		if secrets, err = secretfile.Load(f.secretsFile); err != nil {
			return nil, usageError{err}
		}
	}
	var pol *job.Policy
	if f.policyFile != "" {
		var err error
		if pol, err = loadTaskPolicy(f.policyFile); err != nil {
			return nil, usageError{err}
		}
	}
	b, err := f.taskBackend(ctx, d)
	if err != nil {
		return nil, err
	}
	return taskstore.New(filepath.Join(d.StoreDir, "tasks"), lifecycle.Config{Backend: b, AllowHostNetwork: f.allowHost, Egress: d.Egress, HangTimeout: f.hang, HeartbeatEvery: f.beat,
		Observer: d.Observer, Secrets: secrets, Roots: d.Roots, Logger: d.Logger, Runner: d.Runner, Policy: pol})
}

// taskBackend is the backend tasks run on: --task-backend, checked and
// probed at start like --default-backend, or else the door's default
// backend. A task that finds it unavailable later ends backend.unavailable
// (lifecycle probes before every run); there is no fallback.
func (f *taskFlags) taskBackend(ctx context.Context, d taskDeps) (backend.Backend, error) {
	kind := d.DefaultBackend
	if f.backend != "" {
		k, err := doorBackend(ctx, d.Backends, "task-backend", f.backend, d.UnsafeLocalProcess)
		if err != nil {
			return nil, err
		}
		kind = k
	}
	b, ok := d.Backends[kind]
	if !ok {
		return nil, job.Errorf(job.CodeBackendUnavail, "task backend %s is not built into this binary", kind).With("backend", kind)
	}
	return b, nil
}
