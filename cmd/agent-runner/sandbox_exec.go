package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

func newSandboxExecCmd(sf *serverFlags) *cobra.Command {
	var req client.ExecRequest
	var env []string
	var stdinPath string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "exec SANDBOX -- ARGV...",
		Short: "Run a command in a sandbox: prints its stdout and stderr, exits with its exit code",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if req.Env, err = keyValues("--env", env); err != nil {
				return err
			}
			if stdinPath != "" {
				data, err := readInput(stdinPath)
				if err != nil {
					return err
				}
				req.Stdin = string(data)
			}
			req.Argv, req.TimeoutS = args[1:], int64(timeout/time.Second)
			ctx, stop := signalContext()
			defer stop()
			res, err := sf.client().SandboxExec(ctx, args[0], req)
			if err != nil {
				return err
			}
			os.Stdout.WriteString(res.Stdout)
			os.Stderr.WriteString(res.Stderr)
			return execExit(res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Cwd, "cwd", "", "working directory, relative to the sandbox's workspace")
	f.StringArrayVar(&env, "env", nil, "KEY=VALUE, repeatable")
	f.StringVar(&stdinPath, "stdin", "", "file whose bytes are the command's stdin, or - for this stdin")
	f.DurationVar(&timeout, "timeout", 0, "the command's timeout (default: the server's, 2m)")
	return cmd
}

// execExit turns an exec's result into the CLI's exit status: the
// command's exit code when it exited, else the run's error (a policy
// denial, a timeout), which exitCode maps.
func execExit(res client.ExecResult) error {
	if res.Truncated {
		fmt.Fprintf(os.Stderr, "agent-runner: output truncated (run %s has the hashes of all of it)\n", res.RunID)
	}
	if res.ExitCode != nil {
		if *res.ExitCode == 0 {
			return nil
		}
		return silentExit(*res.ExitCode)
	}
	if res.Error != nil {
		return res.Error
	}
	return job.Errorf(job.CodeInternal, "run %s ended %s without an exit code", res.RunID, res.Status)
}

func newSandboxCopyCmd(sf *serverFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cp FILE SANDBOX:PATH | SANDBOX:PATH FILE",
		Short: "Copy a file into a sandbox or out of it (FILE - is stdin or stdout)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			srcID, srcPath, srcRemote := sandboxRef(args[0])
			dstID, dstPath, dstRemote := sandboxRef(args[1])
			if srcRemote == dstRemote {
				return usageError{fmt.Errorf("cp: exactly one of the two must be SANDBOX:PATH")}
			}
			ctx, stop := signalContext()
			defer stop()
			c := sf.client()
			if dstRemote {
				data, err := readInput(args[0])
				if err != nil {
					return err
				}
				var mode uint32
				if fi, err := os.Stat(args[0]); err == nil && args[0] != "-" {
					mode = uint32(fi.Mode().Perm())
				}
				return c.WriteSandboxFile(ctx, dstID, dstPath, data, mode)
			}
			var buf bytes.Buffer
			if err := c.ReadSandboxFile(ctx, srcID, srcPath, &buf); err != nil {
				return err
			}
			if args[1] == "-" {
				_, err := os.Stdout.Write(buf.Bytes())
				return err
			}
			if err := os.WriteFile(args[1], buf.Bytes(), 0o644); err != nil {
				return job.Wrap(job.CodeRunIOFailed, err, "cannot write the copy").With("path", args[1])
			}
			return nil
		},
	}
}

// sandboxRef splits "SANDBOX:PATH"; a local path with a colon in it is
// written ./a:b (an id never holds '/').
func sandboxRef(arg string) (id, path string, ok bool) {
	id, path, ok = strings.Cut(arg, ":")
	if !ok || !store.ValidID(id) {
		return "", "", false
	}
	return id, path, true
}
