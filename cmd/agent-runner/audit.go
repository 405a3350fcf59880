package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/agent/audit"
	"github.com/agent-runner/agent-runner/agent/launch"
)

func init() {
	auditCmd := &cobra.Command{Use: "audit", Short: "Inspect agent run audit logs"}
	var asJSON bool
	verify := &cobra.Command{
		Use:   "verify RUN_DIR|audit.jsonl",
		Short: "Check an audit log's hash chain; exits 1 with the broken line on tampering",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := audit.VerifyPath(args[0])
			if err != nil {
				return err
			}
			if rep.OK {
				checkSummaryHead(args[0], &rep)
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
	rootCmd.AddCommand(auditCmd)
}

// checkSummaryHead compares summary.json's audit_head_sha256 (when the
// argument is a run directory) with the log's last line, which catches a
// removed or edited tail that the chain alone cannot.
func checkSummaryHead(arg string, rep *audit.Report) {
	fi, err := os.Stat(arg)
	if err != nil || !fi.IsDir() {
		return
	}
	b, err := os.ReadFile(filepath.Join(arg, "summary.json"))
	if err != nil {
		return
	}
	var sum launch.Summary
	if json.Unmarshal(b, &sum) != nil || sum.AuditHeadSHA256 == "" {
		return
	}
	if sum.AuditHeadSHA256 != rep.HeadSHA256 {
		rep.OK = false
		rep.BrokenLine = rep.Lines
		rep.Problem = "last line does not match summary.json audit_head_sha256 (tail edited or cut)"
	}
}
