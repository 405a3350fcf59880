package main

import (
	"path/filepath"

	"github.com/spf13/cobra"
)

// newReplayCmd is `agent-runner replay`.
func newReplayCmd() *cobra.Command {
	var runDir, storeDir, out string
	cmd := &cobra.Command{
		Use:   "replay --run DIR",
		Short: "Re-run a stored job on its original workspace state and report whether it reproduced",
		Long: "Replay reads request.json and result.json from a run directory, restores the workspace the job\n" +
			"ran on (verified against snapshot.json), runs it again as a new job and compares exit code,\n" +
			"stdout/stderr and artifact hashes. It exits 0 whenever a report was produced.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runDir == "" {
				return usageError{errString("--run is required")}
			}
			if storeDir == "" {
				// <store>/runs/<job_id> -> <store>
				storeDir = filepath.Dir(filepath.Dir(filepath.Clean(runDir)))
			}
			r, err := newRunner(storeDir, "")
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			rep, err := r.Replay(ctx, runDir)
			if err != nil {
				return err
			}
			return writeResult(out, rep)
		},
	}
	cmd.Flags().StringVar(&runDir, "run", "", "run directory (<store>/runs/<job_id>)")
	cmd.Flags().StringVar(&storeDir, "store-dir", "", "store for the replay job (default: the run's own store)")
	cmd.Flags().StringVar(&out, "out", "", "write the report to this file instead of stdout")
	return cmd
}
