package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/backend"
	_ "github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/docs/schemas"
	"github.com/agent-runner/agent-runner/door/mcpserver"
	"github.com/agent-runner/agent-runner/plane"
	"github.com/agent-runner/agent-runner/runner"
)

type fixture struct {
	cs   *mcp.ClientSession
	root string
	ws   string
}

// connect serves the tools over streamable HTTP and connects the SDK
// client. The operator's backend is local_process, named explicitly
// (linux_sandbox is not linked into this test binary).
func connect(t *testing.T) fixture {
	t.Helper()
	return connectTo(t, mcpserver.Config{Backend: "local_process"})
}

// connectTo is connect with cfg's Backend and AllowShell.
func connectTo(t *testing.T, cfg mcpserver.Config) fixture {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "approved")
	ws := filepath.Join(root, "repo")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello over mcp\n"), 0o644)
	b, ok := backend.Lookup(cfg.Backend)
	if !ok {
		t.Fatalf("backend %s is not registered", cfg.Backend)
	}
	r, err := runner.New(runner.Config{StoreDir: filepath.Join(dir, "store"), DefaultBackend: cfg.Backend, Backends: backend.Set{cfg.Backend: b}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plane.Open(context.Background(), plane.Config{Runner: r, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	cfg.Jobs, cfg.WorkspaceRoots = p.Jobs, []string{root}
	s := mcpserver.New(cfg)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return fixture{cs: cs, root: root, ws: ws}
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
	}
	return out, res.IsError, text
}

func TestToolsListed(t *testing.T) {
	f := connect(t)
	tools, err := f.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("%s lacks a generated input or output schema", tool.Name)
		}
	}
	if strings.Join(names, ",") != "sandbox.artifacts,sandbox.cancel,sandbox.run,sandbox.status" {
		t.Errorf("tools = %v", names)
	}
}

func TestRunReturnsTheResult(t *testing.T) {
	f := connect(t)
	out, isErr, text := call(t, f.cs, "sandbox.run", map[string]any{
		"workspace_path": f.ws, "argv": []string{"cat", "hello.txt"},
		"policy": map[string]any{"allowed_commands": []any{"cat"}},
		"trace":  map[string]any{"trace_id": "tr_mcp", "gateway_request_id": "gw_9"},
	})
	if isErr {
		t.Fatalf("tool error: %s", text)
	}
	res := out["result"].(map[string]any)
	if out["status"] != "completed" || res["stdout"].(map[string]any)["text"] != "hello over mcp\n" {
		t.Errorf("result = %v", out)
	}
	if res["trace"].(map[string]any)["gateway_request_id"] != "gw_9" {
		t.Errorf("trace not echoed: %v", res["trace"])
	}
	b, _ := json.Marshal(res)
	if err := schemas.ValidateResult(b); err != nil {
		t.Errorf("result does not match the RunJobResult schema: %v", err)
	}
}

func TestAdapterRefusals(t *testing.T) {
	f := connect(t)
	outside := t.TempDir()
	link := filepath.Join(f.root, "sneaky")
	os.Symlink(outside, link)
	tests := []struct {
		name string
		args map[string]any
		code string
	}{
		{"shell", map[string]any{"workspace_path": f.ws, "argv": []string{"bash", "-c", "id"}, "policy": map[string]any{"allowed_commands": []any{"bash"}}}, "policy.shell_denied"},
		{"shell string", map[string]any{"workspace_path": f.ws, "argv": []string{"cat hello.txt | nc x 1"}}, "policy.shell_denied"},
		{"outside roots", map[string]any{"workspace_path": outside, "argv": []string{"true"}}, "validation.path_escape"},
		{"symlink out of a root", map[string]any{"workspace_path": link, "argv": []string{"true"}}, "validation.path_escape"},
		{"runner policy still applies", map[string]any{"workspace_path": f.ws, "argv": []string{"curl", "x"}, "policy": map[string]any{"allowed_commands": []any{"cat"}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, isErr, text := call(t, f.cs, "sandbox.run", tt.args)
			if tt.code == "" {
				if isErr || out["status"] != "policy_denied" {
					t.Errorf("want a policy_denied result, got %v %s", out, text)
				}
				return
			}
			if !isErr || !strings.Contains(text, `"code":"`+tt.code+`"`) {
				t.Errorf("want tool error %s, got %v %q", tt.code, isErr, text)
			}
		})
	}
}

func TestAsyncStatusArtifactsCancel(t *testing.T) {
	f := connect(t)
	out, isErr, text := call(t, f.cs, "sandbox.run", map[string]any{
		"workspace_path": f.ws, "argv": []string{"sleep", "30"}, "wait": false,
		"policy": map[string]any{"allowed_commands": []any{"sleep"}},
	})
	if isErr || out["status"] != "queued" {
		t.Fatalf("async run = %v %s", out, text)
	}
	id := out["job_id"].(string)
	if _, isErr, text := call(t, f.cs, "sandbox.artifacts", map[string]any{"job_id": id}); !isErr || !strings.Contains(text, "job.not_terminal") {
		t.Errorf("artifacts of a running job = %s", text)
	}
	out, isErr, text = call(t, f.cs, "sandbox.cancel", map[string]any{"job_id": id})
	if isErr || out["status"] != "canceled" {
		t.Errorf("cancel = %v %s", out, text)
	}
	out, _, _ = call(t, f.cs, "sandbox.status", map[string]any{"job_id": id})
	if out["status"] != "canceled" {
		t.Errorf("status after cancel = %v", out)
	}
	if _, isErr, text := call(t, f.cs, "sandbox.status", map[string]any{"job_id": "job_nope"}); !isErr || !strings.Contains(text, "job.not_found") {
		t.Errorf("unknown job = %s", text)
	}
}
