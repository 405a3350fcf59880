package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/agent/launch"
)

// NewManifestServer exposes exactly the gateway tools an agent manifest
// grants (list_logs ... run_tests) as MCP tools. Every call goes through
// the session's gateway, so it is checked against the compiled policy,
// counted against max_tool_calls and written to the run's audit log.
func NewManifestServer(sess *launch.Session) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "agent-runner-" + sess.Manifest.Name, Version: "1"}, nil)
	for _, info := range sess.Gateway.Tools() {
		var schema map[string]any
		_ = json.Unmarshal(info.InputSchema, &schema)
		name := info.Name
		s.AddTool(&mcp.Tool{Name: name, Description: info.Description, InputSchema: schema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				args := req.Params.Arguments
				if len(args) == 0 {
					args = json.RawMessage("{}")
				}
				out, err := sess.Call(ctx, name, args)
				if err != nil {
					return toolError(err), nil
				}
				var structured map[string]any
				if json.Unmarshal(out, &structured) != nil {
					structured = nil
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, StructuredContent: structured}, nil
			})
	}
	return s
}
