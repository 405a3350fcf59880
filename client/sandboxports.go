package client

import (
	"strconv"
	"strings"
)

// SandboxPortPath is the server path (for Do) that proxies to path on a
// server listening on 127.0.0.1:port inside sandbox id: GET, POST, PUT,
// PATCH, DELETE or OPTIONS it with any body, or open a WebSocket on it
// (docs/sessions.md, "Ports"). path may carry a query ("/api?x=1"); it
// is sent as it is written. The server in the sandbox never sees the
// client's token.
func SandboxPortPath(id string, port int, path string) string {
	return sandboxPath(id) + "/ports/" + strconv.Itoa(port) + "/" + strings.TrimPrefix(path, "/")
}

// SandboxPortURL is SandboxPortPath as an absolute URL of c's server,
// for an HTTP client of another kind (a request needs c's token in
// Authorization, as Do sends it) or a WebSocket (its scheme ws or wss
// for http or https).
func (c *Client) SandboxPortURL(id string, port int, path string) string {
	return c.BaseURL + SandboxPortPath(id, port, path)
}
