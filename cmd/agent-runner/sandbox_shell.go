package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// defaultShells are tried in order when `sandbox shell` is given no
// command: the first the sandbox can start is the shell.
var defaultShells = [][]string{{"bash"}, {"sh"}}

func newSandboxShellCmd(sf *serverFlags) *cobra.Command {
	var req client.ProcessRequest
	var env []string
	cmd := &cobra.Command{
		Use:   "shell SANDBOX [-- ARGV...]",
		Short: "Open an interactive terminal in a sandbox (bash, else sh, or ARGV), as kubectl exec -it",
		Long: `Start ARGV (default: bash if the sandbox can start it, else sh) in the
sandbox and attach to it over its WebSocket. With a terminal on stdin and
stdout, the process gets a pseudo-terminal of this terminal's size, this
terminal is put in raw mode (restored on exit) and every size change is
sent on; Ctrl-C and Ctrl-D are typed into the sandbox. Otherwise (stdin
or stdout piped, as kubectl exec -i) the process gets no terminal: stdin
is copied to it and closed at its end, its stdout and stderr come back
apart. Exits with the process's exit code. If this command is stopped
(SIGTERM, SIGHUP) or its connection drops, the process is killed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if req.Env, err = keyValues("--env", env); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			return sandboxShell(ctx, sf.client(), args[0], args[1:], req)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Cwd, "cwd", "", "working directory, relative to the sandbox's workspace")
	f.StringArrayVar(&env, "env", nil, "KEY=VALUE, repeatable")
	f.StringVar(&req.Tag, "tag", "shell", "the process's tag in `sandbox ps`")
	return cmd
}

// sandboxShell runs argv (or a default shell) in sandbox id attached to
// this process's stdin and stdout and returns its exit as the CLI's.
func sandboxShell(ctx context.Context, c *client.Client, id string, argv []string, req client.ProcessRequest) error {
	interactive := isTerminal(os.Stdin) && isTerminal(os.Stdout)
	var size client.PtySize
	if interactive {
		size.Cols, size.Rows = terminalSize(os.Stdin)
		req.Pty = &size
	}
	p, err := startShell(ctx, c, id, argv, req)
	if err != nil {
		return err
	}
	opts := client.AttachOptions{}
	if !interactive {
		opts.Stderr = os.Stderr
	}
	term, err := c.AttachProcess(ctx, id, p.PID, opts)
	if err != nil {
		killShell(c, id, p.PID)
		return err
	}
	defer term.Close()
	if interactive {
		restore := makeRaw(os.Stdin)
		defer restore()
		stopResizing := followSize(term)
		defer stopResizing()
		go io.Copy(term, os.Stdin) // blocked in a read when the process ends; the exit ends it
	} else {
		go copyStdin(ctx, c, id, p.PID)
	}
	io.Copy(os.Stdout, term)
	code, err := term.Wait()
	if err != nil {
		var jerr *job.Error
		if ctx.Err() != nil || (errors.As(err, &jerr) && jerr.Code == job.CodeRunIOFailed) {
			// Stopped, or the connection dropped: nobody is left to type
			// into the process.
			killShell(c, id, p.PID)
		}
		return err
	}
	if code != 0 {
		return silentExit(code)
	}
	return nil
}

// startShell starts argv, or else the first of defaultShells the
// sandbox can start (one it lacks or its policy refuses is skipped).
func startShell(ctx context.Context, c *client.Client, id string, argv []string, req client.ProcessRequest) (client.Process, error) {
	if len(argv) > 0 {
		req.Argv = argv
		return c.StartProcess(ctx, id, req)
	}
	var err error
	for _, shell := range defaultShells {
		req.Argv = shell
		var p client.Process
		if p, err = c.StartProcess(ctx, id, req); err == nil {
			return p, nil
		}
		var jerr *job.Error
		if !errors.As(err, &jerr) || (jerr.Code != job.CodeRunSpawnFailed && jerr.Code != job.CodeCommandDenied) {
			return p, err
		}
	}
	return client.Process{}, err
}

// followSize sends this terminal's size to term on every SIGWINCH,
// until the returned function is called.
func followSize(term *client.Terminal) (stop func()) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range winch {
			if cols, rows := terminalSize(os.Stdin); cols > 0 && rows > 0 {
				term.Resize(cols, rows)
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(winch)
		<-done
	}
}

// copyStdin passes this process's stdin to the sandbox's process over
// HTTP, one read at a time and in order, then ends its input (the
// socket's framing has no end of input).
func copyStdin(ctx context.Context, c *client.Client, id string, pid int) {
	buf := make([]byte, 64<<10)
	for {
		n, err := os.Stdin.Read(buf)
		if n > 0 {
			if c.WriteProcessStdin(ctx, id, pid, buf[:n], false) != nil {
				return // it ended; its status is on its way
			}
		}
		if err != nil {
			c.WriteProcessStdin(ctx, id, pid, nil, true)
			return
		}
	}
}

// killShell stops the process the shell started, within a few seconds
// even when this command is being stopped.
func killShell(c *client.Client, id string, pid int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.KillProcess(ctx, id, pid)
}
