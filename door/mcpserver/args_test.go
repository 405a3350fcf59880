package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/door/mcpserver"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/validation"
)

// local is `agent-runner mcp`'s cache namespace: this host's own user.
func local(*mcp.CallToolRequest) (string, error) { return buildcache.LocalNamespace, nil }

// toolErr is the stable error object a tool error carries.
type toolErr struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// callErr calls a tool and returns the {"error": ...} of its structured
// content, checking that the result is a tool error whose text is the
// same JSON.
func callErr(t *testing.T, cs *mcp.ClientSession, name string, args any) *toolErr {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v, want a tool error", name, err)
	}
	if !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		t.Fatalf("%s: not a tool error: %s", name, b)
	}
	var structured, text struct {
		Error *toolErr `json:"error"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &structured); err != nil || structured.Error == nil {
		t.Fatalf("%s: structured content %s is not {\"error\": {...}}", name, b)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: content = %d blocks, want 1", name, len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok || json.Unmarshal([]byte(tc.Text), &text) != nil {
		t.Fatalf("%s: text content is not the error JSON: %#v", name, res.Content[0])
	}
	if diff := cmp.Diff(structured, text); diff != "" {
		t.Errorf("%s: text and structured content differ (-structured +text):\n%s", name, diff)
	}
	if structured.Error.Message == "" {
		t.Errorf("%s: error without a message: %+v", name, structured.Error)
	}
	return structured.Error
}

// TestArgumentErrorsAreStable: a bad argument (missing, of the wrong type,
// unknown) is a tool error in the HTTP API's error shape, as are the
// runner's own validation errors of what sandbox.run passes through.
func TestArgumentErrorsAreStable(t *testing.T) {
	f := connectTo(t, mcpserver.Config{Backend: "local_process", CacheNamespace: local})
	tests := []struct {
		name string
		tool string
		args any
		want toolErr
	}{
		{"missing argv", "sandbox.run", map[string]any{"workspace_path": f.ws},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "argv"}}},
		{"missing workspace_path", "sandbox.run", map[string]any{"argv": []string{"true"}},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "workspace_path"}}},
		{"empty argv", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{}},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "argv"}}},
		{"argv a string", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": "cat hello.txt"},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "argv"}}},
		{"limit of the wrong type", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{"true"}, "limits": map[string]any{"timeout_ms": "10s"}},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "limits.timeout_ms"}}},
		{"unknown argument", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{"true"}, "readonly_mount": []string{"x"}},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "readonly_mount"}}},
		{"unknown limit", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{"true"}, "limits": map[string]any{"timeout": 5}},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "limits.timeout"}}},
		{"unknown cache field", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{"true"}, "caches": []any{map[string]any{"name": "go", "dir": "/c"}}},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "caches[0].dir"}}},
		{"unknown policy field", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{"true"}, "policy": map[string]any{"allow_commands": []any{"true"}}},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "policy.allow_commands"}}},
		{"policy field of the wrong type", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{"true"}, "policy": map[string]any{"allowed_env": "HOME"}},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "policy.allowed_env"}}},
		// The runner's validation, reached through the new arguments.
		{"negative limit", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{"true"}, "limits": map[string]any{"memory_mb": -1}},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "limits.memory_mb"}}},
		{"limit over the maximum", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{"true"}, "limits": map[string]any{"max_processes": 1 << 40}},
			toolErr{Code: "validation.limit_exceeded", Details: map[string]any{"field": "limits.max_processes", "max": float64(validation.DefaultMax.MaxProcesses), "value": float64(1 << 40)}}},
		{"readonly mount escaping", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{"true"}, "readonly_mounts": []string{"../x"}},
			toolErr{Code: "validation.path_escape", Details: map[string]any{"field": "workspace.readonly_mounts", "path": "../x"}}},
		{"readonly mount missing", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{"true"}, "readonly_mounts": []string{"node_modules"}},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "workspace.readonly_mounts", "path": "node_modules"}}},
		{"cache name", "sandbox.run", map[string]any{"workspace_path": f.ws, "argv": []string{"true"}, "caches": []any{map[string]any{"name": "Go Cache", "path": "/cache/go"}}},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "workspace.caches", "name": "Go Cache"}}},
		{"status without job_id", "sandbox.status", map[string]any{},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "job_id"}}},
		{"job_id a number", "sandbox.cancel", map[string]any{"job_id": 7},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "job_id"}}},
		{"unknown status argument", "sandbox.artifacts", map[string]any{"job_id": "job_x", "wait": true},
			toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "wait"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := callErr(t, f.cs, tt.tool, tt.args)
			if diff := cmp.Diff(tt.want, *got, cmpopts.IgnoreFields(toolErr{}, "Message"), cmpopts.IgnoreMapEntries(func(k string, _ any) bool { return k == "cause" })); diff != "" {
				t.Errorf("error (-want +got):\n%s\nmessage: %s", diff, got.Message)
			}
		})
	}
}

// TestOutputSchemaAdmitsErrors: clients such as the TypeScript SDK
// validate a tool result's structured content against the tool's output
// schema, tool errors included: a result and a tool error of each tool
// must both satisfy it (checked here with a validator other than the
// SDK's).
func TestOutputSchemaAdmitsErrors(t *testing.T) {
	f := connect(t)
	tools, err := f.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Schema{}
	for _, tool := range tools.Tools {
		b, _ := json.Marshal(tool.OutputSchema)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(tool.Name+".json", doc); err != nil {
			t.Fatal(err)
		}
		if schemas[tool.Name], err = c.Compile(tool.Name + ".json"); err != nil {
			t.Fatalf("%s: output schema: %v", tool.Name, err)
		}
	}
	out, _, _ := call(t, f.cs, "sandbox.run", runArgs(f.ws, "true"))
	id := out["job_id"].(string)
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"sandbox.run", runArgs(f.ws, "true")},
		{"sandbox.run", map[string]any{"argv": 1}},
		{"sandbox.status", map[string]any{"job_id": id}},
		{"sandbox.status", map[string]any{"job_id": "job_nope"}},
		{"sandbox.artifacts", map[string]any{"job_id": id}},
		{"sandbox.artifacts", map[string]any{}},
		{"sandbox.cancel", map[string]any{"job_id": id}},
		{"sandbox.cancel", map[string]any{"job_id": "job_nope"}},
	}
	for _, c := range calls {
		res, err := f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if err := schemas[c.tool].Validate(v); err != nil {
			t.Errorf("%s %v (error %v): structured content %s does not satisfy the output schema: %v", c.tool, c.args, res.IsError, b, err)
		}
	}
}

// TestRunPassesWorkspaceAndLimits: readonly_mounts, caches and limits
// reach the RunJobRequest that sandbox.run builds.
func TestRunPassesWorkspaceAndLimits(t *testing.T) {
	f := connect(t)
	out, isErr, text := call(t, f.cs, "sandbox.run", map[string]any{
		"workspace_path": f.ws, "argv": []string{"python3", "-c", "print('x' * 100)"},
		"policy": map[string]any{"allowed_commands": []any{"python3"}},
		"limits": map[string]any{"timeout_ms": 20000, "max_stdout_bytes": 10, "max_processes": 64},
	})
	if isErr {
		t.Fatalf("tool error: %s", text)
	}
	res := out["result"].(map[string]any)
	stdout := res["stdout"].(map[string]any)
	if got := stdout["text"]; got != "xxxxxxxxxx" || stdout["truncated"] != true {
		t.Errorf("stdout = %v, want 10 bytes, truncated (max_stdout_bytes)", stdout)
	}
}

// TestCacheNamespace: sandbox.run submits on behalf of the tool call's
// caller, whose namespace Config.CacheNamespace names; without one caches
// are refused (as jobs.Service.Submit refuses them), and a caller it
// cannot name gets its error.
func TestCacheNamespace(t *testing.T) {
	caches := func(ws string) map[string]any {
		return map[string]any{"workspace_path": ws, "argv": []string{"true"}, "caches": []any{map[string]any{"name": "go", "path": "/cache/go"}}}
	}
	tests := []struct {
		name string
		ns   func(*mcp.CallToolRequest) (string, error)
		want toolErr
	}{
		{"no namespace", nil, toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "workspace.caches"}}},
		{"caller refused", func(*mcp.CallToolRequest) (string, error) {
			return "", job.Errorf(job.CodeUnauthorized, "unknown token")
		},
			toolErr{Code: "auth.unauthorized"}},
		// The local namespace admits the caches; local_process cannot
		// bind them, which the runner says.
		{"local", local, toolErr{Code: "validation.invalid_request", Details: map[string]any{"field": "workspace", "backend": "local_process"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := connectTo(t, mcpserver.Config{Backend: "local_process", CacheNamespace: tt.ns})
			got := callErr(t, f.cs, "sandbox.run", caches(f.ws))
			if diff := cmp.Diff(tt.want, *got, cmpopts.IgnoreFields(toolErr{}, "Message")); diff != "" {
				t.Errorf("error (-want +got):\n%s\nmessage: %s", diff, got.Message)
			}
		})
	}
}
