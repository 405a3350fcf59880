package main

import (
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/mcpserver"
)

// agent-runner mcp --manifest M serves that agent's granted tools; the run
// (audit.jsonl, summary.json) is written under --runs-dir.
func init() {
	var runsDir string
	var network egressFlags
	for _, c := range rootCmd.Commands() {
		if c.Name() == "mcp" {
			c.Flags().StringVar(&runsDir, "runs-dir", defaultAgentRunsDir, "with --manifest: directory for the run's audit and summary")
			network.register(c.Flags())
		}
	}
	mcpManifest = func(cmd *cobra.Command, manifest, backend string) error {
		ctx, stop := signalContext()
		defer stop()
		opts, err := toolOptions(runsDir, backend, &network)
		if err != nil {
			return err
		}
		sess, err := launch.Open(ctx, manifest, "mcp", opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "agent-runner mcp: run %s in %s\n", sess.ID, sess.Dir)
		runErr := mcpserver.NewManifestServer(sess).Run(ctx, &mcp.StdioTransport{})
		if _, err := sess.Finish("mcp_session_closed", ""); err != nil && runErr == nil {
			runErr = err
		}
		return runErr
	}
}
