// Command agent-runner is the secure execution plane for AI coding agents:
// validate, run and replay jobs, serve the HTTP API and MCP, run capability-
// scoped agents and long-running agent tasks.
//
// Each subcommand lives in its own file and adds itself to the root command
// from init(). Backends are linked in by the blank imports below.
package main

import (
	"os"

	"github.com/spf13/cobra"

	_ "github.com/agent-runner/agent-runner/backend/firecracker"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	_ "github.com/agent-runner/agent-runner/backend/localprocess"
)

// rootCmd is the agent-runner command; subcommands attach in their init().
var rootCmd = &cobra.Command{
	Use:           "agent-runner",
	Short:         "Run agent-produced commands and agent tasks under enforced policy",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	// A process re-exec'd as the sandbox init never returns from here.
	linuxsandbox.MaybeInit()
	os.Exit(execute(os.Args[1:]))
}

// execute runs the CLI and returns the process exit code (see exitcode.go).
func execute(args []string) int {
	rootCmd.SetArgs(args)
	err := rootCmd.Execute()
	return exitCode(err)
}
