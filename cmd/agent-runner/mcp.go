package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/door/mcpserver"
	"github.com/agent-runner/agent-runner/plane"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/telemetry"
)

// newMCPCmd is `agent-runner mcp`: the sandbox tools over stdio here, an
// agent manifest's gateway tools (--manifest) in mcp_manifest.go.
func newMCPCmd() *cobra.Command {
	var roots []string
	var allowShell, unsafeLocal bool
	var view sandboxFlags // --sandbox-ro, --sandbox-path, --allow-unenforced-limits
	var storeDir, manifest, backendKind string
	var gateway mcpManifestFlags // --runs-dir and egress, for --manifest
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve agent-runner's sandbox tools to an MCP client over stdio",
		Long: "mcp speaks the Model Context Protocol on stdin/stdout. Tools: sandbox.run (seed 001's\n" +
			"sandbox/run: MCP tool names cannot contain '/'), sandbox.status, sandbox.artifacts,\n" +
			"sandbox.cancel. Workspaces must lie under a --workspace-root; shell commands are refused\n" +
			"unless --allow-shell. Jobs run on --backend (linux_sandbox; mcp refuses to start when it\n" +
			"is unavailable, and local_process needs --unsafe-local-process) with the operator's\n" +
			"sandbox view (--sandbox-ro, --sandbox-path, as on run and serve). The runner's own\n" +
			"validation and policy apply to every job.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			backends, err := view.backends(storeDir)
			if err != nil {
				return err
			}
			kind, err := checkBackendFlag(backends, "backend", backendKind, unsafeLocal)
			if err != nil {
				return err
			}
			warnUnsafeLocal(telemetry.Logger(os.Stderr, slog.LevelWarn), unsafeLocal, kind)
			if manifest != "" {
				for _, f := range []string{"sandbox-ro", "sandbox-path"} {
					if cmd.Flags().Changed(f) {
						return usageError{fmt.Errorf("--%s applies to the sandbox tools, not to --manifest", f)}
					}
				}
				return gateway.serve(manifest, kind)
			}
			ctx, stop := signalContext()
			defer stop()
			if err := probeBackend(ctx, backends, "backend", kind); err != nil {
				return err
			}
			r, err := runner.New(runner.Config{StoreDir: storeDir, DefaultBackend: kind, Backends: backend.Set{kind: backends[kind]}})
			if err != nil {
				return err
			}
			defer r.Close()
			// The jobs run on a plane of their own (embedded queue under
			// the store, workers in this process), as serve's do.
			p, err := plane.Open(ctx, plane.Config{Runner: r, Logger: telemetry.Logger(os.Stderr, slog.LevelWarn)})
			if err != nil {
				return err
			}
			defer p.Close()
			// Over stdio every caller is this host's own user: its build
			// caches are the local namespace's, as `agent-runner run`'s.
			s := mcpserver.New(mcpserver.Config{
				Jobs: p.Jobs, WorkspaceRoots: roots, Excluded: []string{r.Store().Dir()}, AllowShell: allowShell, Backend: kind,
				CacheNamespace: func(*mcp.CallToolRequest) (string, error) { return buildcache.LocalNamespace, nil },
			})
			return s.Run(ctx, &mcp.StdioTransport{})
		},
	}
	cmd.Flags().StringArrayVar(&roots, "workspace-root", nil, "directory under which workspaces may be snapshotted (repeatable)")
	cmd.Flags().BoolVar(&allowShell, "allow-shell", false, "let argv name a shell (the request policy must still allow it)")
	cmd.Flags().StringVar(&storeDir, "store-dir", defaultStoreDir, "run store directory")
	cmd.Flags().StringVar(&manifest, "manifest", "", "serve this agent manifest's gateway tools instead of the sandbox tools")
	cmd.Flags().StringVar(&backendKind, "backend", isolatingDefault, "backend every job (or, with --manifest, every subprocess tool) runs on; never a fallback")
	cmd.Flags().BoolVar(&unsafeLocal, unsafeLocalFlag, false, unsafeLocalHelp)
	view.register(cmd.Flags())
	gateway.register(cmd.Flags())
	return cmd
}
