package main

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/mcpserver"
)

// serve mounts the MCP sandbox tools at /mcp (streamable HTTP), behind the
// same bearer-token auth as the rest of the API (scope submit).
func init() {
	var roots []string
	var allowShell bool
	serveCmd.Flags().StringArrayVar(&roots, "workspace-root", nil, "directory under which MCP sandbox.run workspaces may lie (repeatable; none disables sandbox.run)")
	serveCmd.Flags().BoolVar(&allowShell, "mcp-allow-shell", false, "let MCP sandbox.run name a shell")
	serveMounts = append(serveMounts, func(_ context.Context, d serveDeps) error {
		s := mcpserver.New(mcpserver.Config{Jobs: &mcpserver.Local{Runner: d.Runner}, WorkspaceRoots: roots, AllowShell: allowShell})
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		d.Mux.Handle("/mcp", d.Auth(auth.ScopeSubmit, h))
		return nil
	})
}
