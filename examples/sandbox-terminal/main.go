// Command sandbox-terminal is the Go client's terminal in a few lines
// (docs/sessions.md, "Terminal"): it creates a sandbox on the server at
// AGENT_RUNNER_URL (token AGENT_RUNNER_TOKEN), opens a shell on an 80x24
// pty over the process's WebSocket, resizes it, types into it, and
// prints what the shell showed and its exit code.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/agent-runner/agent-runner/client"
)

func main() {
	ctx := context.Background()
	c := client.New(os.Getenv("AGENT_RUNNER_URL"), os.Getenv("AGENT_RUNNER_TOKEN"))
	sb, err := c.CreateSandbox(ctx, client.SandboxRequest{TimeoutS: 600})
	if err != nil {
		log.Fatal(err)
	}
	defer c.DeleteSandbox(ctx, sb.ID)
	term, err := c.OpenTerminal(ctx, sb.ID, client.ProcessRequest{Argv: []string{"sh"}}, client.PtySize{Cols: 80, Rows: 24})
	if err != nil {
		log.Fatal(err)
	}
	defer term.Close()
	// The resize and the typing travel in order on the one socket.
	term.Resize(100, 30)
	term.Write([]byte("stty size; exit 3\n"))
	shown, _ := io.ReadAll(term)
	code, err := term.Wait()
	fmt.Printf("pid %d showed %q\nexit code %d, %v\n", term.PID, shown, code, err)
}
