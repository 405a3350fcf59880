package runner

import (
	"context"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/snapshot"
)

// overlay prepares a copy-once, overlay-many workspace. Prepare only lets
// overlay through to backends whose Capabilities().Overlay is true.
func (e *execution) overlay(ctx context.Context, opt snapshot.Options) (backend.Workspace, error) {
	return backend.Workspace{}, job.Errorf(job.CodeBackendSetupFailed, "overlay snapshots are not available in this build")
}
