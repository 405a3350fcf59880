package main

import (
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/mcpserver"
)

// mcpManifest is set by a file that serves an agent manifest's gateway
// tools over MCP (agent-runner mcp --manifest); nil when not built in.
var mcpManifest func(cmd *cobra.Command, manifest string) error

func init() {
	var roots []string
	var allowShell bool
	var storeDir, manifest string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve agent-runner's sandbox tools to an MCP client over stdio",
		Long: "mcp speaks the Model Context Protocol on stdin/stdout. Tools: sandbox.run (seed 001's\n" +
			"sandbox/run: MCP tool names cannot contain '/'), sandbox.status, sandbox.artifacts,\n" +
			"sandbox.cancel. Workspaces must lie under a --workspace-root; shell commands are refused\n" +
			"unless --allow-shell. The runner's own validation and policy apply to every job.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if manifest != "" {
				if mcpManifest == nil {
					return usageError{errors.New("manifest tools over MCP are not built into this binary")}
				}
				return mcpManifest(cmd, manifest)
			}
			r, err := newRunner(storeDir, "")
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			s := mcpserver.New(mcpserver.Config{Jobs: &mcpserver.Local{Runner: r}, WorkspaceRoots: roots, Excluded: []string{r.Store().Dir()}, AllowShell: allowShell})
			return s.Run(ctx, &mcp.StdioTransport{})
		},
	}
	cmd.Flags().StringArrayVar(&roots, "workspace-root", nil, "directory under which workspaces may be snapshotted (repeatable)")
	cmd.Flags().BoolVar(&allowShell, "allow-shell", false, "let argv name a shell (the request policy must still allow it)")
	cmd.Flags().StringVar(&storeDir, "store-dir", defaultStoreDir, "run store directory")
	cmd.Flags().StringVar(&manifest, "manifest", "", "serve this agent manifest's gateway tools instead of the sandbox tools")
	rootCmd.AddCommand(cmd)
}
