package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/client"
	"github.com/agent-runner/agent-runner/job"
)

// newSandboxCmd is `agent-runner sandbox` and its verbs, clients of a
// server's kept sandboxes (/v1/sandboxes, docs/sessions.md).
func newSandboxCmd() *cobra.Command {
	root := &cobra.Command{Use: "sandbox", Short: "Create, use and remove kept sandboxes on a server (see docs/sessions.md)"}
	var sf serverFlags
	sf.add(root)
	root.PersistentFlags().AddFlagSet(root.Flags())
	root.AddCommand(newSandboxCreateCmd(&sf), newSandboxListCmd(&sf), newSandboxExecCmd(&sf), newSandboxCopyCmd(&sf))
	root.AddCommand(sandboxAction(&sf, "pause", "Freeze every process of a sandbox", (*client.Client).PauseSandbox))
	root.AddCommand(sandboxAction(&sf, "resume", "Thaw a paused sandbox", (*client.Client).ResumeSandbox))
	root.AddCommand(sandboxAction(&sf, "rm", "Delete a sandbox: its processes are killed, its workspace removed", (*client.Client).DeleteSandbox))
	root.AddCommand(newSandboxTimeoutCmd(&sf))
	root.AddCommand(newSandboxShellCmd(&sf), newSandboxPsCmd(&sf), newSandboxStartCmd(&sf), newSandboxLogsCmd(&sf), newSandboxKillCmd(&sf))
	return root
}

func newSandboxCreateCmd(sf *serverFlags) *cobra.Command {
	var req client.SandboxRequest
	var workspace, policyPath string
	var timeout time.Duration
	var metadata []string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox; prints its record (--quiet: its id)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if req.Metadata, err = keyValues("--metadata", metadata); err != nil {
				return err
			}
			if workspace != "" {
				req.Workspace = &client.SandboxWorkspace{Path: workspace}
			}
			if policyPath != "" {
				data, err := readInput(policyPath)
				if err != nil {
					return err
				}
				req.Policy = new(job.Policy)
				if err := json.Unmarshal(data, req.Policy); err != nil {
					return usageError{fmt.Errorf("--policy %s: %w", policyPath, err)}
				}
			}
			req.TimeoutS = int64(timeout / time.Second)
			ctx, stop := signalContext()
			defer stop()
			sb, err := sf.client().CreateSandbox(ctx, req)
			if err != nil {
				return err
			}
			if quiet {
				fmt.Println(sb.ID)
				return nil
			}
			return writeResult("", sb)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.ID, "id", "", "the sandbox's id (default: minted, sbx_...)")
	f.StringVar(&req.Backend, "backend", "", "backend kind (default: the server's)")
	f.StringVar(&workspace, "workspace", "", "start from a copy of this directory (under the server's --workspace-root)")
	f.StringVar(&policyPath, "policy", "", "exec policy JSON file ({allowed_commands, allowed_env, allow_shell}), or - for stdin")
	f.DurationVar(&timeout, "timeout", 0, "expire after this long (default: the server's --sandbox-default-timeout)")
	f.StringArrayVar(&metadata, "metadata", nil, "key=value, repeatable")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the id")
	return cmd
}

func newSandboxListCmd(sf *serverFlags) *cobra.Command {
	var state string
	var metadata []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List sandboxes, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			md, err := keyValues("--metadata", metadata)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			list, err := sf.client().ListSandboxes(ctx, client.SandboxFilter{State: client.SandboxState(state), Metadata: md})
			if err != nil {
				return err
			}
			if asJSON {
				return writeResult("", map[string]any{"sandboxes": list})
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tBACKEND\tEXECS\tEXPIRES")
			for _, sb := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", sb.ID, sb.State, sb.Backend, sb.Execs, sb.ExpiresAt.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only this state (running, paused, stopped, expired, failed)")
	cmd.Flags().StringArrayVar(&metadata, "metadata", nil, "key=value that must match, repeatable")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the records as JSON")
	return cmd
}

func newSandboxTimeoutCmd(sf *serverFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "timeout SANDBOX DURATION",
		Short: "Make a sandbox expire DURATION (10m, 1h) from now",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := time.ParseDuration(args[1])
			if err != nil {
				return usageError{fmt.Errorf("timeout: %w", err)}
			}
			ctx, stop := signalContext()
			defer stop()
			sb, err := sf.client().SetSandboxTimeout(ctx, args[0], int64(d/time.Second))
			if err != nil {
				return err
			}
			return writeResult("", sb)
		},
	}
}

// sandboxAction is a verb that calls one client method per sandbox id
// and prints each record it answers.
func sandboxAction(sf *serverFlags, name, short string, call func(*client.Client, context.Context, string) (client.Sandbox, error)) *cobra.Command {
	return &cobra.Command{
		Use:   name + " SANDBOX...",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			c := sf.client()
			for _, id := range args {
				sb, err := call(c, ctx, id)
				if err != nil {
					return err
				}
				if err := writeResult("", sb); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// keyValues parses repeated key=value flags.
func keyValues(flag string, pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("%s %q: want key=value", flag, p)}
		}
		out[k] = v
	}
	return out, nil
}
