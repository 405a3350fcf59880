package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/job"
)

// toolError is the one place job errors become MCP tool errors: IsError,
// with {"error": {code, message, details}} (the HTTP API's error body) as
// structured content and, for clients that read only text, as JSON text.
// Argument errors, adapter refusals and the runner's own validation all
// come back this way.
func toolError(err error) *mcp.CallToolResult {
	b, _ := json.Marshal(map[string]any{"error": job.AsError(err)})
	return &mcp.CallToolResult{
		IsError:           true,
		StructuredContent: json.RawMessage(b),
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
	}
}
