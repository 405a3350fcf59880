package acceptance

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdMCPCall runs `agent-runner mcp [flags]` over stdio as an MCP host
// would (the official Go SDK's client), calls one tool with a JSON object
// of arguments, and prints the tool's structured result (or its text) on
// stdout. A tool error fails the command unless negated; with -http the
// client speaks streamable HTTP to the script's serve (/mcp) instead.
//
//	mcpcall [-http] TOOL ARGS_JSON [mcp flags...]
func cmdMCPCall(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("mcpcall", flag.ContinueOnError)
	overHTTP := fs.Bool("http", false, "call serve's /mcp")
	ts.Check(fs.Parse(args))
	if fs.NArg() < 2 {
		ts.Fatalf("usage: mcpcall [-http] TOOL ARGS_JSON [mcp flags...]")
	}
	var toolArgs map[string]any
	if err := json.Unmarshal([]byte(fs.Arg(1)), &toolArgs); err != nil {
		ts.Fatalf("arguments are not a JSON object: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var transport mcp.Transport
	if *overHTTP {
		transport = &mcp.StreamableClientTransport{Endpoint: ts.Getenv("URL") + "/mcp", HTTPClient: bearerClient(ts.Getenv("AGENT_RUNNER_TOKEN"))}
	} else {
		cmd := exec.Command(filepath.Join(binDir, "agent-runner"), append([]string{"mcp"}, fs.Args()[2:]...)...)
		cmd.Dir = ts.MkAbs(".")
		cmd.Env = scriptEnv(ts)
		transport = &mcp.CommandTransport{Command: cmd}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "acceptance", Version: "1"}, nil)
	cs, err := c.Connect(ctx, transport, nil)
	if err != nil {
		ts.Fatalf("connecting to agent-runner mcp: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: fs.Arg(0), Arguments: toolArgs})
	if err != nil {
		ts.Fatalf("calling %s: %v", fs.Arg(0), err)
	}
	var out []byte
	if res.StructuredContent != nil {
		out, _ = json.MarshalIndent(res.StructuredContent, "", "  ")
	} else {
		var texts []string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, t.Text)
			}
		}
		out = []byte(strings.Join(texts, "\n"))
	}
	fmt.Fprintf(ts.Stdout(), "%s\n", out)
	if res.IsError != neg {
		ts.Fatalf("%s: tool error = %v:\n%s", fs.Arg(0), res.IsError, out)
	}
}
