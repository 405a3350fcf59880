package main

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/mcpserver"
)

// serve mounts the MCP sandbox tools at /mcp (streamable HTTP) on serve's
// jobs service (its queue, workers and records), behind the
// same bearer-token auth as the rest of the API (scope submit); workspaces
// must lie under serve's --workspace-root, and every job runs on serve's
// --default-backend (a client may not name another).
func init() {
	var allowShell bool
	serveCmd.Flags().BoolVar(&allowShell, "mcp-allow-shell", false, "let MCP sandbox.run name a shell")
	serveMounts = append(serveMounts, func(_ context.Context, d serveDeps) error {
		s := mcpserver.New(mcpserver.Config{Jobs: d.Jobs, WorkspaceRoots: d.Roots.Dirs, Excluded: d.Roots.Excluded, AllowShell: allowShell, Backend: d.Backend})
		// serve's root handler already holds Host and Origin to loopback,
		// --addr and --allowed-host (httpapi guard.go), for /mcp too; the
		// SDK's own loopback-only Host check would refuse --allowed-host.
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
		d.Mux.Handle("/mcp", d.Auth(auth.ScopeSubmit, h))
		return nil
	})
}
