package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
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
pseudo-terminal; otherwise stdin and stdout are piped. Exits with the
shell's exit status.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			backends, err := view.backends(storeDir)
			if err != nil {
				return err
			}
			return taskShell(cmd.Context(), backends, filepath.Join(storeDir, "tasks"), args[0], args[1:], backendKind, timeout)
		},
	}
	cmd.Flags().StringVar(&storeDir, "store-dir", "./agent-runner-runs", "serve's store directory (tasks are under <store-dir>/tasks)")
	cmd.Flags().StringVar(&backendKind, "backend", "", "backend to open the shell on (default: the task's)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "end the shell after this long (0: no limit)")
	view.register(cmd.Flags()) // serve's, so the shell sees what the agent saw
	return cmd
}

func taskShell(ctx context.Context, backends backend.Set, root, id string, argv []string, backendKind string, timeout time.Duration) error {
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
	spec := agentstep.SandboxSpec(l, t, argv, env)
	spec.JobID = "shell-" + t.Metadata.ID
	spec.Limits.Timeout = timeout
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
		spec.Env = append(spec.Env, "TERM="+term)
		spec.Stdin, spec.Stdout, spec.Stderr, spec.TTY = p.slave, p.slave, p.slave, true
		detach := p.attach(os.Stdin, os.Stdout)
		out, err := b.Run(ctx, spec)
		detach()
		return shellExit(out, err)
	}
	// Wrapped, so the backend copies through a pipe and the sandbox never
	// holds the user's own descriptor.
	spec.Stdin, spec.Stdout, spec.Stderr = readerOnly{os.Stdin}, writerOnly{os.Stdout}, writerOnly{os.Stderr}
	ctx, stopInt := signal.NotifyContext(ctx, os.Interrupt)
	defer stopInt()
	return shellExit(b.Run(ctx, spec))
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
func shellExit(out backend.Outcome, err error) error {
	if err != nil {
		return err
	}
	if out.ExitCode != nil {
		if *out.ExitCode == 0 {
			return nil
		}
		return silentExit(*out.ExitCode)
	}
	fmt.Fprintf(os.Stderr, "agent-runner: shell ended: %s %s\n", out.Reason, out.Signal)
	return silentExit(exitOperational)
}
