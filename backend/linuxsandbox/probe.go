package linuxsandbox

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// probe runs /bin/true in a sandbox to learn whether this host allows the
// namespaces, mounts and pivot_root the backend needs.
func (b *Backend) probe(ctx context.Context) error {
	if !initHooked {
		return fmt.Errorf("the sandbox init is not hooked into this binary (call linuxsandbox.MaybeInit first in main or TestMain)")
	}
	ws, err := os.MkdirTemp("", "agent-runner-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	out, err := b.Run(ctx, backend.Spec{
		JobID: "probe", Argv: []string{"/bin/true"}, Workspace: backend.Workspace{Dir: ws}, Cwd: ".",
		Network: job.NetworkDisabled, Limits: backend.Limits{Timeout: 10 * time.Second, TmpBytes: 1 << 20},
	})
	if err != nil {
		return err
	}
	if out.ExitCode == nil || *out.ExitCode != 0 {
		return fmt.Errorf("probe sandbox ended with %s %s", out.Reason, out.Signal)
	}
	return nil
}
