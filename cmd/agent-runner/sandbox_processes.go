package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/client"
)

// The process verbs of `agent-runner sandbox`: ps, start, logs, kill
// (docs/sessions.md, "Processes").

func newSandboxPsCmd(sf *serverFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ps SANDBOX",
		Short: "List a sandbox's processes: the running ones and the newest ended ones",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			list, err := sf.client().ListProcesses(ctx, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeResult("", map[string]any{"processes": list})
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PID\tTAG\tSTATE\tEXIT\tOUTPUT\tCOMMAND")
			for _, p := range list {
				exit := string(p.Status)
				if p.ExitCode != nil {
					exit = strconv.Itoa(*p.ExitCode)
				}
				if exit == "" {
					exit = "-"
				}
				tag := p.Tag
				if tag == "" {
					tag = "-"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", p.PID, tag, p.State, exit, p.OutputBytes, strings.Join(p.Argv, " "))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the records as JSON")
	return cmd
}

func newSandboxStartCmd(sf *serverFlags) *cobra.Command {
	var req client.ProcessRequest
	var env []string
	cmd := &cobra.Command{
		Use:   "start SANDBOX -- ARGV...",
		Short: "Start a background process in a sandbox; prints its pid",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if req.Env, err = keyValues("--env", env); err != nil {
				return err
			}
			req.Argv = args[1:]
			ctx, stop := signalContext()
			defer stop()
			p, err := sf.client().StartProcess(ctx, args[0], req)
			if err != nil {
				return err
			}
			fmt.Println(p.PID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Tag, "tag", "", "a label for the process, shown by ps")
	f.StringVar(&req.Cwd, "cwd", "", "working directory, relative to the sandbox's workspace")
	f.StringArrayVar(&env, "env", nil, "KEY=VALUE, repeatable")
	return cmd
}

func newSandboxLogsCmd(sf *serverFlags) *cobra.Command {
	var offset int64
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs SANDBOX PID",
		Short: "Print a process's output from a byte offset (what the server's buffer holds; -f: until it exits)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid, err := parsePID(args[1])
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			return processLogs(ctx, sf.client(), args[0], pid, offset, follow)
		},
	}
	cmd.Flags().Int64Var(&offset, "offset", 0, "the byte offset to start from")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the process exits")
	return cmd
}

// errCaughtUp ends a logs read without -f at the output written when it
// began.
var errCaughtUp = errors.New("caught up")

// processLogs writes the process's stdout and stderr from offset to this
// process's; without follow it stops at what was written when it began.
func processLogs(ctx context.Context, c *client.Client, id string, pid int, offset int64, follow bool) error {
	until := int64(-1)
	if !follow {
		p, err := c.GetProcess(ctx, id, pid)
		if err != nil {
			return err
		}
		if p.State == "running" {
			if offset == p.OutputBytes {
				return nil
			}
			until = p.OutputBytes
		}
	}
	err := c.FollowProcess(ctx, id, pid, offset, func(ev client.ProcessEvent) error {
		switch ev.Type {
		case "stdout":
			os.Stdout.Write(ev.Data)
		case "stderr":
			os.Stderr.Write(ev.Data)
		case "gap":
			fmt.Fprintf(os.Stderr, "agent-runner: bytes %d to %d are no longer kept\n", ev.From, ev.To)
		}
		if until >= 0 && ev.Next >= until {
			return errCaughtUp
		}
		return nil
	})
	if errors.Is(err, errCaughtUp) {
		return nil
	}
	return err
}

func newSandboxKillCmd(sf *serverFlags) *cobra.Command {
	var sig string
	cmd := &cobra.Command{
		Use:   "kill SANDBOX PID",
		Short: "Stop a process (TERM, the grace, KILL) and print it; --signal sends one signal instead",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid, err := parsePID(args[1])
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			c := sf.client()
			if sig == "" {
				p, err := c.KillProcess(ctx, args[0], pid)
				if err != nil {
					return err
				}
				return writeResult("", p)
			}
			if err := c.SignalProcess(ctx, args[0], pid, sig); err != nil {
				return err
			}
			p, err := c.GetProcess(ctx, args[0], pid)
			if err != nil {
				return err
			}
			return writeResult("", p)
		},
	}
	cmd.Flags().StringVarP(&sig, "signal", "s", "", "send this signal (HUP INT QUIT KILL USR1 USR2 TERM CONT STOP WINCH ALRM) to its process group")
	return cmd
}

// parsePID reads a PID argument.
func parsePID(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, usageError{fmt.Errorf("PID %q: want a process id (a positive number)", s)}
	}
	return n, nil
}
