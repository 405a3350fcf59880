package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

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
func addTool[In, Out any](s *mcp.Server, t *mcp.Tool, h func(context.Context, In) (Out, error)) {
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
		o, err := h(ctx, a)
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

// decodeArgs decodes a tool's arguments strictly into v: every property
// in required present, no unknown field, every value of its field's JSON
// type. Each problem is a validation.invalid_request naming the field.
func decodeArgs(raw json.RawMessage, required []string, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(raw, &present); err != nil {
		return job.Errorf(job.CodeInvalidRequest, "arguments must be a JSON object")
	}
	for _, name := range required {
		if _, ok := present[name]; !ok {
			return job.Errorf(job.CodeInvalidRequest, "arguments: %s is required", name).With("field", name)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return argsError(err)
	}
	return nil
}

// argsError says what is wrong with the arguments in the tool's terms
// (argument names and JSON types), not in Go's.
func argsError(err error) *job.Error {
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(the arguments)"
		}
		return job.Errorf(job.CodeInvalidRequest, "arguments: %s: got a JSON %s, want %s", field, typ.Value, jsonType(typ.Type)).With("field", field)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return job.Errorf(job.CodeInvalidRequest, "arguments are not valid JSON: they end early")
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		name = strings.Trim(name, `"`)
		return job.Errorf(job.CodeInvalidRequest, "arguments: unknown field %q (tools/list gives the tool's input schema)", name).With("field", name)
	}
	// A value's own decoder (an allowed_commands entry, say) refused it.
	return job.Wrap(job.CodeInvalidRequest, err, "arguments: "+msg)
}

// jsonType names a Go type as the JSON it decodes from.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.Kind().String()
}
