package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/agent/launch"
)

// newAuditCmd is `agent-runner audit` (verify).
func newAuditCmd() *cobra.Command {
	auditCmd := &cobra.Command{Use: "audit", Short: "Inspect audit logs (capability runs, kept sandboxes)"}
	var asJSON bool
	verify := &cobra.Command{
		Use:   "verify RUN_DIR|SANDBOX_DIR|audit.jsonl",
		Short: "Check an audit log's hash chain; exits 1 with the broken line on tampering",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := launch.VerifyRun(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeResult("", rep); err != nil {
					return err
				}
			} else if rep.OK {
				fmt.Fprintf(cmd.OutOrStdout(), "ok: %s: %d lines, chain intact, complete=%v\n", rep.Path, rep.Lines, rep.Complete)
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "audit verify: %s: line %d: %s\n", rep.Path, rep.BrokenLine, rep.Problem)
			}
			if !rep.OK {
				return silentExit(exitOperational)
			}
			return nil
		},
	}
	verify.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	auditCmd.AddCommand(verify)
	return auditCmd
}
