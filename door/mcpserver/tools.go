package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/job"
)

// addTool registers a typed tool whose arguments this package decodes
// itself, so that a bad argument (a missing required one, a wrong type, an
// unknown field) is a job error in the stable shape like any other, not
// the SDK's plain-text schema complaint. The input schema is generated
// from In, as the SDK would; the output schema is Out's, which a tool
// error's {"error": {code, message, details}} also satisfies.
func addTool[In, Out any](s *mcp.Server, t *mcp.Tool, h func(context.Context, *mcp.CallToolRequest, In) (Out, error)) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: input schema of %s: %v", t.Name, err))
	}
	out, err := outputSchema[Out]()
	if err != nil {
		panic(fmt.Sprintf("mcpserver: output schema of %s: %v", t.Name, err))
	}
	tool := *t
	tool.InputSchema, tool.OutputSchema = in, out
	required := in.Required
	s.AddTool(&tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a In
		if err := decodeArgs(req.Params.Arguments, required, &a); err != nil {
			return toolError(err), nil
		}
		o, err := h(ctx, req, a)
		if err != nil {
			return toolError(err), nil
		}
		return structured(o), nil
	})
}

// outputSchema is Out's generated schema with an "error" property (the
// stable error object) added, and Out's required properties made one
// alternative of two: a result, or a tool error carrying only "error".
func outputSchema[Out any]() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[Out](nil)
	if err != nil {
		return nil, err
	}
	e, err := jsonschema.For[job.Error](nil)
	if err != nil {
		return nil, err
	}
	e.Description = "the stable error object {code, message, details} of a tool error"
	s.Properties["error"] = e
	if len(s.Required) > 0 {
		s.AnyOf = []*jsonschema.Schema{{Required: s.Required}, {Required: []string{"error"}}}
		s.Required = nil
	}
	return s, nil
}

// structured is a successful result: v as structured content and, for
// clients that read only text, as JSON text.
func structured(v any) *mcp.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		return toolError(job.Wrap(job.CodeInternal, err, "cannot encode the tool's result"))
	}
	return &mcp.CallToolResult{StructuredContent: json.RawMessage(b), Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}
