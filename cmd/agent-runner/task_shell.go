package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/policy"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/taskstore"
	"github.com/agent-runner/agent-runner/validation"
)

// newTaskShellCmd is `agent-runner task shell`: it works on the local
// task store, because it needs this host's terminal and starts the sandbox
// itself.
func newTaskShellCmd() *cobra.Command {
	var storeDir, backendKind string
	var timeout time.Duration
	var view sandboxFlags
	cmd := &cobra.Command{
		Use:   "shell TASK_ID [-- COMMAND ARGS...]",
		Short: "Open a shell in a sandbox like the agent's, over a finished task's preserved workspace (local store)",
		Long: `Open a shell (bash, else sh, or COMMAND) in a sandbox like the one the
agent ran in: the same backend (the one metadata.json records, unless
--backend), the workspace at /workspace with the repository subpath as the
working directory, no network, the task's CPU and memory limits. Secrets
and the task token are not injected again. Runs against the task store on
this host (serve's --store-dir). With a terminal on stdin the shell gets a
pseudo-terminal; otherwise stdin and stdout are piped. The shell is a
run of the run service, recorded as <store-dir>/runs/<task_id>.shell-<hex>
(docs/tasks.md, "Steps and the task policy"). Exits with the shell's exit
status.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			backends, err := view.backends(storeDir)
			if err != nil {
				return err
			}
			return taskShell(cmd.Context(), backends, storeDir, args[0], args[1:], backendKind, timeout)
		},
	}
	cmd.Flags().StringVar(&storeDir, "store-dir", "./agent-runner-runs", "serve's store directory (tasks are under <store-dir>/tasks)")
	cmd.Flags().StringVar(&backendKind, "backend", "", "backend to open the shell on (default: the task's)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "end the shell after this long (0: no limit)")
	view.register(cmd.Flags()) // serve's, so the shell sees what the agent saw
	return cmd
}

// shellNoTimeout is the shell's limit under --timeout 0 (no limit): a
// run of the run service always has one, so it is ten years.
const shellNoTimeout = 10 * 365 * 24 * time.Hour

func taskShell(ctx context.Context, backends backend.Set, storeDir, id string, argv []string, backendKind string, timeout time.Duration) error {
	root := filepath.Join(storeDir, "tasks")
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return job.Errorf(job.CodeJobNotFound, "no task store at %s (use --store-dir)", root)
	}
	s, err := taskstore.New(root, lifecycle.Config{})
	if err != nil {
		return err
	}
	l, err := s.Workspace(id)
	if err != nil {
		return err
	}
	if err := stage.Remount(ctx, l); err != nil {
		return job.Wrap(job.CodeBackendSetupFailed, err, "cannot mount the task's size-limited workspace")
	}
	t, err := manifest.Load(l.Manifest())
	if err != nil {
		return err
	}
	b, err := shellBackend(backends, l, backendKind)
	if err != nil {
		return err
	}
	if backendKind == "" && !b.Capabilities().Isolating {
		// The task fell back to an unisolated backend; a shell there is a
		// host shell, which nobody should get by default.
		return usageError{fmt.Errorf("task %s ran on %s, which is not a sandbox; pass --backend %s to open an unisolated shell anyway, or --backend linux_sandbox", id, b.Kind(), b.Kind())}
	}
	release, err := s.LockWorkspace(id)
	if err != nil {
		return err
	}
	defer release()
	if err := b.Available(ctx); err != nil {
		return job.Wrap(job.CodeBackendUnavail, err, b.Kind()+" is unavailable on this host")
	}
	if len(argv) == 0 {
		argv = []string{"/bin/sh"}
		if _, err := os.Stat("/bin/bash"); err == nil {
			argv = []string{"/bin/bash"}
		}
	}
	exe, err := agentstep.Resolve(b, argv[0])
	if err != nil {
		return usageError{err}
	}
	argv[0] = exe
	home, err := agentstep.PrepareHome(l, b)
	if err != nil {
		return err
	}
	env := agentstep.BaseEnv(t, home, b)
	// The shell is a step of the run service beside serve's (its record
	// is runs/<task_id>.shell-<random>), under the policy that allows
	// the operator's own command (policy.Smallest).
	r, err := runner.New(runner.Config{StoreDir: storeDir})
	if err != nil {
		return err
	}
	defer r.Close()
	step := &runner.Step{Backend: b}
	opts := runner.Options{Step: step}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if isTerminal(os.Stdin) && isTerminal(os.Stdout) {
		p, err := openPTY()
		if err != nil {
			return job.Wrap(job.CodeBackendSetupFailed, err, "cannot allocate a pseudo-terminal")
		}
		term := os.Getenv("TERM")
		if term == "" {
			term = "xterm"
		}
		env = append(env, "TERM="+term)
		// The terminal carries the shell's output; its record has none.
		step.Terminal = p.slave
		detach := p.attach(os.Stdin, os.Stdout)
		res, err := r.Step(ctx, shellRequest(l, t, argv, env, b, timeout), opts)
		detach()
		return shellExit(res, err)
	}
	// Wrapped, so the backend copies through a pipe and the sandbox never
	// holds the user's own descriptor; the output reaches the user as
	// the run captures it.
	step.Stdin = readerOnly{os.Stdin}
	opts.Output = func(_, stream string, p []byte) {
		if stream == "stderr" {
			os.Stderr.Write(p)
			return
		}
		os.Stdout.Write(p)
	}
	ctx, stopInt := signal.NotifyContext(ctx, os.Interrupt)
	defer stopInt()
	return shellExit(r.Step(ctx, shellRequest(l, t, argv, env, b, timeout), opts))
}

// shellRequest is the shell's run: the agent's sandbox (StepRequest)
// with a fresh id, the task's own policy for argv, and timeout (0: no
// limit) instead of the task's.
func shellRequest(l stage.Layout, t *manifest.Task, argv, env []string, b backend.Backend, timeout time.Duration) job.Request {
	var tag [4]byte
	rand.Read(tag[:]) // never fails (crypto/rand)
	id := runner.StepID(t.Metadata.ID, "shell-"+hex.EncodeToString(tag[:]))
	req := agentstep.StepRequest(l, t, id, argv, env, policy.Smallest(argv, env, b))
	if timeout <= 0 {
		timeout = shellNoTimeout
	}
	req.Limits.TimeoutMS = timeout.Milliseconds()
	return req
}

// shellBackend is --backend, else the backend the task ran on, from
// backends.
func shellBackend(backends backend.Set, l stage.Layout, kind string) (backend.Backend, error) {
	if kind == "" {
		if md, ok := lifecycle.ReadMetadata(l.Dir); ok && md.Backend != "" {
			kind = md.Backend
		} else {
			kind = "linux_sandbox"
		}
	}
	b, ok := backends[validation.NormalizeKind(kind)]
	if !ok {
		return nil, usageError{fmt.Errorf("unknown backend %q", kind)}
	}
	return b, nil
}

// shellExit turns the shell's end into the CLI's exit status.
func shellExit(res job.Result, err error) error {
	if err != nil {
		return err
	}
	if res.Termination == nil {
		// Refused before the shell started: the run's error says why.
		if res.Error != nil {
			return res.Error
		}
		return job.Errorf(job.CodeBackendSetupFailed, "the shell ended without running")
	}
	if res.ExitCode != nil {
		if *res.ExitCode == 0 {
			return nil
		}
		return silentExit(*res.ExitCode)
	}
	fmt.Fprintf(os.Stderr, "agent-runner: shell ended: %s %s\n", res.Termination.Reason, res.Termination.Signal)
	return silentExit(exitOperational)
}
