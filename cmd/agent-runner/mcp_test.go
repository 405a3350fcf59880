package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/docs/schemas"
	"github.com/agent-runner/agent-runner/door/mcpserver"
)

// TestMCPExample checks that examples/mcp-sandbox-run.json is a tools/call
// whose arguments build a request that matches the RunJobRequest schema,
// then sends it to `agent-runner mcp` over stdio with the Go SDK client.
func TestMCPExample(t *testing.T) {
	root, _ := filepath.Abs("../..")
	raw, err := os.ReadFile(filepath.Join(root, "examples", "mcp-sandbox-run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var call struct {
		JSONRPC, Method string
		Params          struct {
			Name      string
			Arguments json.RawMessage
		}
	}
	if err := json.Unmarshal(raw, &call); err != nil || call.JSONRPC != "2.0" || call.Method != "tools/call" || call.Params.Name != "sandbox.run" {
		t.Fatalf("not a sandbox.run tools/call: %v", err)
	}
	var args mcpserver.RunArgs
	if err := json.Unmarshal(call.Params.Arguments, &args); err != nil {
		t.Fatal(err)
	}
	args.WorkspacePath = filepath.Join(root, args.WorkspacePath)
	req, err := mcpserver.Request(mcpserver.Config{WorkspaceRoots: []string{root}}, args)
	if err != nil {
		t.Fatalf("building the request: %v", err)
	}
	b, _ := json.Marshal(req)
	if err := schemas.ValidateRequest(b); err != nil {
		t.Fatalf("embedded request does not match the schema: %v\n%s", err, b)
	}

	// Over stdio, as an MCP host would run it.
	cmd := exec.Command(binary, "mcp", "--workspace-root", root, "--store-dir", sandboxTempDir(t))
	cmd.Dir = root
	c := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var argMap map[string]any
	json.Unmarshal(call.Params.Arguments, &argMap)
	argMap["workspace_path"] = args.WorkspacePath
	if out, err := exec.Command("/usr/bin/python3", "-m", "pytest", "--version").CombinedOutput(); err != nil {
		t.Logf("pytest missing (%s): running echo instead", strings.TrimSpace(string(out)))
		argMap["argv"] = []string{"python3", "-c", "print('3 passed')"}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sandbox.run", Arguments: argMap})
	if err != nil || res.IsError {
		t.Fatalf("sandbox.run over stdio: %v %+v", err, res)
	}
	out, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(out), `"status":"completed"`) || !strings.Contains(string(out), "3 passed") || !strings.Contains(string(out), "gw_req_001") {
		t.Errorf("result over stdio: %s", out)
	}
}

// TestMCPManifestTools serves an agent manifest's gateway tools over
// stdio: only granted tools are listed, every call is checked and audited.
func TestMCPManifestTools(t *testing.T) {
	root, _ := filepath.Abs("../..")
	runs := t.TempDir()
	cmd := exec.Command(binary, "mcp", "--manifest", "examples/agents/log-analyst.yaml", "--runs-dir", runs)
	cmd.Dir = root
	c := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "grep_log,list_logs,read_log,tail_log" {
		t.Errorf("tools = %v, want exactly the manifest's grants", names)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_logs", Arguments: map[string]any{"directory": "examples/agents/logs"}})
	if err != nil || res.IsError {
		t.Fatalf("list_logs: %v %+v", err, res)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_log", Arguments: map[string]any{"path": "/etc/passwd"}})
	if err != nil || !res.IsError {
		t.Errorf("read_log /etc/passwd was not refused: %v %+v", err, res)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_tests", Arguments: map[string]any{}}); err == nil {
		t.Error("a tool the manifest does not grant was callable")
	}
	cs.Close()
	audits, _ := filepath.Glob(filepath.Join(runs, "*", "audit.jsonl"))
	if len(audits) != 1 {
		t.Fatalf("audit logs = %v", audits)
	}
	b, _ := os.ReadFile(audits[0])
	if !strings.Contains(string(b), `"list_logs"`) || !strings.Contains(string(b), "/etc/passwd") {
		t.Errorf("audit log lacks the calls:\n%s", b)
	}
	out, err := exec.Command(binary, "audit", "verify", filepath.Dir(audits[0])).CombinedOutput()
	if err != nil {
		t.Errorf("audit verify: %v %s", err, out)
	}
}
