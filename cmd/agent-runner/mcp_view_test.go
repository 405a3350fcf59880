package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPSandboxViewWorkspaceAndLimits: `agent-runner mcp` takes the
// sandbox view flags as run and serve do, and sandbox.run takes what a
// RunJobRequest's workspace and limits take (readonly_mounts, caches,
// limits); a bad argument is a tool error in the stable shape. Over stdio
// with the official Go SDK client, on linux_sandbox.
func TestMCPSandboxViewWorkspaceAndLimits(t *testing.T) {
	sandboxUsable(t)
	tools := filepath.Join(privateParent(t), "tools")
	bin := filepath.Join(tools, "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(tools, "lib.txt"), []byte("from the tools dir"), 0o644)
	// Not a shell script: under allow_shell false no process may run a
	// shell, a #!/bin/sh script's interpreter included.
	os.WriteFile(filepath.Join(bin, "arhello"), []byte("#!/usr/bin/python3\nprint('hello from the view')\n"), 0o755)
	root := sandboxTempDir(t)
	ws := filepath.Join(root, "repo")
	os.MkdirAll(filepath.Join(ws, "node_modules", "dep"), 0o755)
	os.WriteFile(filepath.Join(ws, "node_modules", "dep", "index.js"), []byte("installed"), 0o644)

	cmd := exec.Command(binary, "mcp", "--workspace-root", root, "--store-dir", sandboxTempDir(t),
		"--sandbox-ro", tools, "--sandbox-path", bin+":/usr/bin:/bin")
	cmd.Dir = root
	c := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	callTool := func(args map[string]any) (*mcp.CallToolResult, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sandbox.run", Arguments: args})
		if err != nil {
			t.Fatalf("sandbox.run: %v", err)
		}
		var out map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
		return res, out
	}

	script := `import os
print(open("` + tools + `/lib.txt").read())
print(open("node_modules/dep/index.js").read())
try:
    open("node_modules/dep/new.js", "w")
    print("WROTE")
except OSError as e:
    print("READ-ONLY", type(e).__name__)
open("/cache/demo/stamp", "w").write("kept")
print("x" * 1000)`
	res, out := callTool(map[string]any{
		"workspace_path": ws, "argv": []string{"python3", "-c", script},
		"policy":          map[string]any{"allowed_commands": []any{"python3"}},
		"readonly_mounts": []string{"node_modules"},
		"caches":          []any{map[string]any{"name": "demo", "path": "/cache/demo"}},
		"limits":          map[string]any{"timeout_ms": 60000, "max_stdout_bytes": 100, "max_processes": 64, "memory_mb": 512},
	})
	if res.IsError {
		t.Fatalf("sandbox.run with readonly_mounts, caches and limits: %v", out)
	}
	result := out["result"].(map[string]any)
	stdout := result["stdout"].(map[string]any)
	want := "from the tools dir\ninstalled\nREAD-ONLY"
	if out["status"] != "completed" || !strings.HasPrefix(stdout["text"].(string), want) || stdout["truncated"] != true {
		t.Errorf("result = %s %v stdout %q truncated %v, want completed, %q first, truncated at max_stdout_bytes", out["status"], result["error"], stdout["text"], stdout["truncated"], want)
	}

	// The cache outlives the job; --sandbox-path resolves a bare name in
	// the --sandbox-ro view.
	_, out = callTool(map[string]any{
		"workspace_path": ws, "argv": []string{"python3", "-c", `print(open("/cache/demo/stamp").read())`},
		"policy": map[string]any{"allowed_commands": []any{"python3"}},
		"caches": []any{map[string]any{"name": "demo", "path": "/cache/demo"}},
	})
	if got := out["result"].(map[string]any)["stdout"].(map[string]any)["text"]; got != "kept\n" {
		t.Errorf("the cache in the next job = %q, want %q", got, "kept\n")
	}
	_, out = callTool(map[string]any{"workspace_path": ws, "argv": []string{"arhello"}, "policy": map[string]any{"allowed_commands": []any{"arhello"}}})
	if got := out["result"].(map[string]any)["stdout"].(map[string]any)["text"]; got != "hello from the view\n" {
		t.Errorf("bare arhello on --sandbox-path = %q (%v)", got, out)
	}

	// A bad argument: the stable error, in structured content and text.
	res, out = callTool(map[string]any{"workspace_path": ws, "argv": []string{"true"}, "limits": map[string]any{"timeout": 5}})
	wantErr := map[string]any{"error": map[string]any{
		"code":    "validation.invalid_request",
		"message": `arguments: unknown field "limits.timeout" (tools/list gives the tool's input schema)`,
		"details": map[string]any{"field": "limits.timeout"},
	}}
	if !res.IsError {
		t.Errorf("an unknown limit was not a tool error: %v", out)
	}
	if diff := cmp.Diff(wantErr, out); diff != "" {
		t.Errorf("structured error (-want +got):\n%s", diff)
	}
	var text map[string]any
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || json.Unmarshal([]byte(tc.Text), &text) != nil || !cmp.Equal(text, wantErr) {
		t.Errorf("text content = %#v, want the structured error as JSON", res.Content[0])
	}
}

// TestMCPSandboxFlagsRefusedWithManifest: the sandbox view flags belong
// to the sandbox tools; with --manifest they would be ignored, so they
// are a usage error.
func TestMCPSandboxFlagsRefusedWithManifest(t *testing.T) {
	_, stderr, code := cli(t, "", "mcp", "--manifest", "agent.yaml", "--backend", "local_process", "--unsafe-local-process", "--sandbox-ro", t.TempDir())
	if code != exitInvalid || !strings.Contains(stderr, "--sandbox-ro applies to the sandbox tools") {
		t.Errorf("mcp --manifest --sandbox-ro = exit %d %q, want a usage error", code, stderr)
	}
}

// TestServeMCPCachesInTheTokensNamespace: over serve's /mcp a
// sandbox.run's caches belong to its bearer token, as over POST /v1/jobs:
// a named token's pass the caller check (and reach local_process, which
// cannot bind them), an unnamed token's are refused for want of a caller.
func TestServeMCPCachesInTheTokensNamespace(t *testing.T) {
	addr := freeAddr(t)
	startGuardedServe(t, addr, map[string]string{"named": "submit,read alice", "unnamed": "submit,read"})
	ws := t.TempDir()
	args := map[string]any{"workspace_path": ws, "argv": []string{"true"}, "caches": []any{map[string]any{"name": "go", "path": "/cache/go"}}}
	tests := []struct {
		token string
		want  map[string]any
	}{
		{"named", map[string]any{"code": "validation.invalid_request", "field": "workspace"}},
		{"unnamed", map[string]any{"code": "validation.invalid_request", "field": "workspace.caches"}},
	}
	for _, tt := range tests {
		t.Run(tt.token, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport(tt.token)}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox.run", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Error struct {
					Code    string         `json:"code"`
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, &out)
			got := map[string]any{"code": out.Error.Code, "field": out.Error.Details["field"]}
			if diff := cmp.Diff(tt.want, got); !res.IsError || diff != "" {
				t.Errorf("sandbox.run with caches, token %s (-want +got):\n%s%s", tt.token, diff, b)
			}
		})
	}
}

// bearerTransport sends every request with its token.
type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
