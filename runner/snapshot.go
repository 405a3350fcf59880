package runner

import (
	"context"
	"encoding/json"
	"path/filepath"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/snapshot"
	"github.com/agent-runner/agent-runner/store"
)

// SnapshotManifestFile records the copied entries and their hashes beside
// the snapshot, so replay can verify it (extension to seed 002's layout).
const SnapshotManifestFile = "snapshot.json"

// snapshot makes the job's workspace and records its hash.
func (e *execution) snapshot(ctx context.Context) (backend.Workspace, error) {
	w := e.req.Workspace
	opt := snapshot.Options{Include: w.Include, Exclude: mountExcludes(w), MaxBytes: e.r.cfg.MaxSnapshotBytes, MaxFiles: e.r.cfg.MaxSnapshotFiles}
	dir := e.r.store.RunDir(e.req.JobID)
	if w.SnapshotStrategy == job.SnapshotOverlay {
		return e.overlay(ctx, opt)
	}
	snap := filepath.Join(dir, store.SnapshotDir)
	m, err := snapshot.Copy(ctx, w.Path, snap, opt)
	if err != nil {
		return backend.Workspace{}, err
	}
	e.res.Replay.WorkspaceSnapshotSHA256 = m.SHA256
	b, err := json.Marshal(m)
	if err != nil {
		return backend.Workspace{}, job.Wrap(job.CodeRunIOFailed, err, "cannot encode snapshot manifest")
	}
	if err := store.WriteFileOnce(filepath.Join(dir, SnapshotManifestFile), b, store.RecordFileMode); err != nil {
		return backend.Workspace{}, err
	}
	e.layers = []string{snap}
	return backend.Workspace{Dir: snap}, nil
}
