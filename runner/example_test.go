package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	_ "github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

func ExampleRunRequest() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello from the snapshot\n"), 0o644)

	res, err := runner.RunRequest(context.Background(), job.Request{
		Workspace: job.Workspace{Path: ws},
		Command:   job.Command{Argv: []string{"cat", "hello.txt"}},
		Policy:    job.Policy{AllowedCommands: []job.CommandRule{{Basename: "cat"}}},
		Backend:   job.BackendSpec{Kind: "local_process"},
	}, filepath.Join(dir, "store"))
	if err != nil {
		fmt.Println("invalid request:", err)
		return
	}
	fmt.Println(res.Status, *res.ExitCode)
	fmt.Print(res.Stdout.Text)
	// Output:
	// completed 0
	// hello from the snapshot
}
