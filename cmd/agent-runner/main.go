// Command agent-runner is the secure execution plane for AI coding agents:
// validate, run and replay jobs, serve the HTTP API and MCP, run capability-
// scoped agents and long-running agent tasks.
//
// Each subcommand lives in its own file as a newXxxCmd constructor;
// newRootCmd below puts them together. Backends are linked in by the blank
// imports below and register themselves (the only init-time registration).
package main

import (
	"os"

	"github.com/spf13/cobra"

	_ "github.com/agent-runner/agent-runner/backend/firecracker"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	_ "github.com/agent-runner/agent-runner/backend/localprocess"
	_ "github.com/agent-runner/agent-runner/backend/oci"
	"github.com/agent-runner/agent-runner/hostcheck"
)

func main() {
	// The doctor's overlay probe re-execs this binary as its child; that
	// child mounts, answers and exits here.
	hostcheck.MaybeOverlayChild()
	// A process re-exec'd as the sandbox init never returns from here.
	linuxsandbox.MaybeInit()
	os.Exit(execute(os.Args[1:]))
}

// execute runs the CLI and returns the process exit code (see exitcode.go).
func execute(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	return exitCode(err)
}

// newRootCmd is the agent-runner command with every subcommand.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "agent-runner",
		Short:         "Run agent-produced commands and agent tasks under enforced policy",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("agent-runner {{.Version}}\n")
	addConfigFlag(root)
	// Running jobs here.
	root.AddCommand(newRunCmd(), newValidateCmd(), newReplayCmd(), newDemoCmd(), newDoctorCmd())
	// A server, its workers, and their clients.
	root.AddCommand(newServeCmd(), newWorkerCmd(), newMCPCmd())
	root.AddCommand(newJobCmds()...)
	root.AddCommand(newListCmd(), newTaskCmd(), newSandboxCmd(), newImageCmd())
	// Agents under a manifest.
	root.AddCommand(newLaunchCmd(), newRunAgentCmd("run-agent", ""), newRunAgentCmd("run-agent-mock", "mock"), newAuditCmd())
	root.AddCommand(newVersionCmd())
	return root
}
