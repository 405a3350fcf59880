package main

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/door/mcpserver"
)

// mountMCP mounts the MCP sandbox tools at /mcp (streamable HTTP) on
// serve's jobs service (its queue, workers and records), behind the same
// bearer-token auth as the rest of the API (scope submit); workspaces must
// lie under serve's --workspace-root, and every job runs on serve's
// --default-backend (a client may not name another). allowShell is
// --mcp-allow-shell. A sandbox.run's build caches live in its bearer
// token's namespace (tokens: serve's --token-file, nil without one), as
// POST /v1/jobs's.
func mountMCP(d serveDeps, allowShell bool, tokens *auth.Tokens) {
	s := mcpserver.New(mcpserver.Config{Jobs: d.Jobs, WorkspaceRoots: d.Roots.Dirs, Excluded: d.Roots.Excluded, AllowShell: allowShell, Backend: d.Backend, CacheNamespace: tokenCacheNamespace(tokens)})
	// serve's root handler already holds Host and Origin to loopback,
	// --addr and --allowed-host (httpapi guard.go), for /mcp too; the
	// SDK's own loopback-only Host check would refuse --allowed-host.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
	d.Mux.Handle("/mcp", d.Auth(auth.ScopeSubmit, h))
}

// tokenCacheNamespace names a /mcp tool call's cache namespace from the
// bearer token on the HTTP request that carried it (the SDK passes its
// header along), as httpapi does for POST /v1/jobs: the token's name, or
// the host's local namespace when serve has no tokens (loopback only).
func tokenCacheNamespace(tokens *auth.Tokens) func(*mcp.CallToolRequest) (string, error) {
	if tokens == nil {
		return func(*mcp.CallToolRequest) (string, error) { return buildcache.LocalNamespace, nil }
	}
	return func(call *mcp.CallToolRequest) (string, error) {
		r := &http.Request{Header: http.Header{}}
		if call.Extra != nil {
			r.Header = call.Extra.Header
		}
		name, err := tokens.Authenticate(r)
		if err != nil {
			return "", err
		}
		return buildcache.TokenNamespace(name), nil
	}
}
