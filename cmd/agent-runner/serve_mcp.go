package main

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/door/mcpserver"
	"github.com/agent-runner/agent-runner/session"
)

// mountMCP mounts the MCP sandbox tools at /mcp (streamable HTTP) on
// serve's jobs service (its queue, workers and records), behind the same
// bearer-token auth as the rest of the API (scope submit); workspaces must
// lie under serve's --workspace-root, and every job runs on serve's
// --default-backend (a client may not name another). allowShell is
// --mcp-allow-shell. A sandbox.run's build caches live in its bearer
// token's namespace (tokens: serve's --token-file, nil without one), as
// POST /v1/jobs's. The kept-sandbox tools (sandbox.create, sandbox.exec,
// ...) work on sessions, serve's session service, and each call needs a
// token with the sessions scope as /v1/sandboxes does.
func mountMCP(d serveDeps, allowShell bool, tokens *auth.Tokens, sessions *session.Service) {
	s := mcpserver.New(mcpserver.Config{
		Jobs: d.Jobs, WorkspaceRoots: d.Roots.Dirs, Excluded: d.Roots.Excluded, AllowShell: allowShell, Backend: d.Backend,
		CacheNamespace: tokenCacheNamespace(tokens), Sessions: sessions, Authorize: tokenAuthorize(tokens),
	})
	// serve's root handler already holds Host and Origin to loopback,
	// --addr and --allowed-host (httpapi guard.go), for /mcp too; the
	// SDK's own loopback-only Host check would refuse --allowed-host.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
	d.Mux.Handle("/mcp", d.Auth(auth.ScopeSubmit, h))
}

// tokenAuthorize checks a /mcp tool call's bearer token (the header of
// the HTTP request that carried it) for a scope; nil without tokens.
func tokenAuthorize(tokens *auth.Tokens) func(*mcp.CallToolRequest, string) error {
	if tokens == nil {
		return nil
	}
	return func(call *mcp.CallToolRequest, scope string) error {
		return tokens.Authorize(callRequest(call), scope)
	}
}

// callRequest is a bare HTTP request carrying a tool call's headers.
func callRequest(call *mcp.CallToolRequest) *http.Request {
	r := &http.Request{Header: http.Header{}}
	if call.Extra != nil && call.Extra.Header != nil {
		r.Header = call.Extra.Header
	}
	return r
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
		name, err := tokens.Authenticate(callRequest(call))
		if err != nil {
			return "", err
		}
		return buildcache.TokenNamespace(name), nil
	}
}
