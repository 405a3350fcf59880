package main

import (
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"

	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/door/mcpserver"
)

// mcpManifestFlags are agent-runner mcp's flags for --manifest, which
// serves that agent's granted tools; the run (audit.jsonl, summary.json)
// is written under --runs-dir.
type mcpManifestFlags struct {
	runsDir string
	network egressFlags
}

func (f *mcpManifestFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.runsDir, "runs-dir", defaultAgentRunsDir, "with --manifest: directory for the run's audit and summary")
	f.network.register(fs)
}

// serve serves manifest's gateway tools over stdio, their subprocess tools
// on backend, until the client closes the session.
func (f *mcpManifestFlags) serve(manifest, backend string) error {
	ctx, stop := signalContext()
	defer stop()
	opts, err := toolOptions(f.runsDir, backend, &f.network)
	if err != nil {
		return err
	}
	sess, err := launch.Open(ctx, manifest, "mcp", opts)
	if err != nil {
		return err
	}
	defer sess.Close()
	fmt.Fprintf(os.Stderr, "agent-runner mcp: run %s in %s\n", sess.ID, sess.Dir)
	runErr := mcpserver.NewManifestServer(sess).Run(ctx, &mcp.StdioTransport{})
	if _, err := sess.Finish("mcp_session_closed", ""); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}
