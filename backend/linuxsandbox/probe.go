package linuxsandbox

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Available probes whether this host can create the sandbox. Only a
// success is remembered: a failure (a transient error, a canceled ctx) is
// retried on the next call, so one bad moment never disables the backend
// for the life of the process, and a door that needs isolation fails
// closed each time instead of being told once and guessing after.
func (b *Backend) Available(ctx context.Context) error {
	b.probeMu.Lock()
	defer b.probeMu.Unlock()
	if b.probed {
		return nil
	}
	var err error
	for attempt := range probeAttempts {
		if err = b.probe(ctx); err == nil {
			b.probed = true
			return nil
		}
		if ctx.Err() != nil || attempt == probeAttempts-1 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
	return err
}

// probeAttempts is how many times one Available call tries the probe.
const probeAttempts = 3

// probe runs /bin/true in a sandbox to learn whether this host allows the
// namespaces, mounts and pivot_root the backend needs.
func (b *Backend) probe(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("probe canceled: %w", err)
	}
	if !initHooked {
		return fmt.Errorf("the sandbox init is not hooked into this binary (call linuxsandbox.MaybeInit first in main or TestMain)")
	}
	ws, err := os.MkdirTemp("", "agent-runner-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	lim := backend.Limits{Timeout: 10 * time.Second, TmpBytes: 1 << 20}
	if !b.allowUnenforced {
		// Limits fail closed (limits.go): a host where every job would
		// end backend.unavailable makes the backend unavailable, so a
		// door refuses to start and says why.
		lim.MemoryBytes, lim.CPUCount, lim.MaxProcesses = 64<<20, 1, 16
	}
	out, err := b.Run(ctx, backend.Spec{
		JobID: "probe", Argv: []string{"/bin/true"}, Workspace: backend.Workspace{Dir: ws}, Cwd: ".",
		Network: job.NetworkDisabled, Limits: lim,
	})
	if err != nil {
		return err
	}
	if out.ExitCode == nil || *out.ExitCode != 0 {
		return fmt.Errorf("probe sandbox ended with %s %s", out.Reason, out.Signal)
	}
	return nil
}
