package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/backend"
)

// newLaunchCmd is `agent-runner launch`.
func newLaunchCmd() *cobra.Command {
	var manifestPath, taskPath, runsDir, backendKind string
	var asJSON, unsafeLocal bool
	var network egressFlags
	cmd := &cobra.Command{
		Use:   "launch --manifest FILE --task FILE [--runs-dir DIR]",
		Short: "Run a scripted agent task under its manifest's compiled policy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kind, err := checkBackendFlag(backend.Defaults(), "backend", backendKind, unsafeLocal)
			if err != nil {
				return err
			}
			task, err := launch.LoadTask(taskPath)
			if err != nil {
				return err
			}
			opts, err := toolOptions(runsDir, kind, &network)
			if err != nil {
				return err
			}
			sum, err := launch.Scripted(cmd.Context(), manifestPath, task, opts)
			if err != nil {
				return err
			}
			return printRunSummary(cmd, sum, asJSON)
		},
	}
	cmd.Flags().StringVar(&manifestPath, "manifest", "", "agent manifest (YAML, or JSON by extension)")
	cmd.Flags().StringVar(&taskPath, "task", "", "task file (JSON, or YAML by extension)")
	cmd.Flags().StringVar(&runsDir, "runs-dir", defaultAgentRunsDir, "directory for run directories")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print summary.json instead of text")
	addToolBackendFlags(cmd, &backendKind, &unsafeLocal, &network)
	cmd.MarkFlagRequired("manifest")
	cmd.MarkFlagRequired("task")
	return cmd
}

// addToolBackendFlags adds --backend and --unsafe-local-process: the
// backend the gateway's subprocess tools run on. A tool call fails with
// backend.unavailable when it cannot start; there is no fallback.
func addToolBackendFlags(cmd *cobra.Command, kind *string, unsafeLocal *bool, network *egressFlags) {
	cmd.Flags().StringVar(kind, "backend", isolatingDefault, "backend subprocess tools (run_tests, git_status) run on; a call fails backend.unavailable when it cannot start")
	cmd.Flags().BoolVar(unsafeLocal, unsafeLocalFlag, false, unsafeLocalHelp)
	network.register(cmd.Flags())
}

// toolOptions are a capability session's launch options: its backend and
// the operator's network settings for subprocess tools.
func toolOptions(runsDir, kind string, network *egressFlags) (launch.Options, error) {
	op, err := network.operator(nil, nil)
	if err != nil {
		return launch.Options{}, err
	}
	return launch.Options{RunsDir: runsDir, Backend: kind, Egress: op, AllowHostNetwork: network.allowHost}, nil
}

// printRunSummary prints a run's outcome (shared by launch and run-agent).
func printRunSummary(cmd *cobra.Command, sum launch.Summary, asJSON bool) error {
	if asJSON {
		return writeResult("", sum)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "run_id: %s\nrun_dir: %s\nexit_reason: %s\ntool_calls_used: %d/%d (allowed %d, denied %d, failed %d)\n",
		sum.RunID, sum.RunDir, sum.ExitReason, sum.ToolCallsUsed, sum.MaxToolCalls, sum.Allowed, sum.Denied, sum.Failed)
	for _, st := range sum.Steps {
		state := "ok"
		switch {
		case !st.Allowed:
			state = "denied: " + st.Reason
		case !st.OK:
			state = "failed: " + st.Reason
		}
		fmt.Fprintf(w, "  %d %s %s\n", st.Call, st.Tool, state)
	}
	if sum.FinalAnswer != "" {
		fmt.Fprintf(w, "final_answer:\n%s\n", sum.FinalAnswer)
	}
	return nil
}
