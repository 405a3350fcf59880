package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/snapshot"
	"github.com/agent-runner/agent-runner/store"
)

// CacheDir is where overlay lower layers live inside the store.
const CacheDir = "cache/workspaces"

// overlay prepares a copy-once, overlay-many workspace: the shared lower
// layer from the store's cache plus a per-job upper layer under the run
// directory. Prepare only lets overlay through to backends whose
// Capabilities().Overlay is true.
//
// The layer is picked, marked used and named in snapshot.json under a
// shared lock of the cache, so Retain (which takes it exclusively) sees
// every layer a job has started on either as recently used or as
// referenced by that job's run.
func (e *execution) overlay(ctx context.Context, opt snapshot.Options) (backend.Workspace, error) {
	cache := filepath.Join(e.r.store.Dir(), CacheDir)
	unlock, err := lockCache(cache, false)
	if err != nil {
		return backend.Workspace{}, err
	}
	defer unlock()
	lower, m, err := snapshot.OverlayLower(ctx, cache, e.req.Workspace.Path, opt)
	if err != nil {
		return backend.Workspace{}, err
	}
	if err := markLayerUsed(lower); err != nil {
		// The job's snapshot.json keeps the layer while the run is kept;
		// only its idle time is measured from the wrong moment.
		e.log().Warn("cannot mark the overlay layer used; retention may remove it early", "layer", filepath.Base(filepath.Dir(lower)), "error", err)
	}
	e.res.Replay.WorkspaceSnapshotSHA256 = m.SHA256
	dir := e.r.store.RunDir(e.req.JobID)
	ws := backend.Workspace{
		Dir:   filepath.Join(dir, store.SnapshotDir),
		Lower: lower,
		Upper: filepath.Join(dir, "overlay", "upper"),
		Work:  filepath.Join(dir, "overlay", "work"),
	}
	for _, d := range []string{ws.Dir, ws.Upper, ws.Work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return backend.Workspace{}, job.Wrap(job.CodeSnapshotFailed, err, "cannot create the overlay directories")
		}
	}
	// snapshot.json points at the layer instead of listing every entry, so
	// the per-job cost stays independent of the workspace size.
	// Strings and numbers: Marshal cannot fail.
	b, _ := json.Marshal(snapshot.Manifest{SHA256: m.SHA256, Files: m.Files, Bytes: m.Bytes, Lower: lower})
	if err := store.WriteFileOnce(filepath.Join(dir, SnapshotManifestFile), b, store.RecordFileMode); err != nil {
		return backend.Workspace{}, err
	}
	e.layers = []string{ws.Upper, lower}
	return ws, nil
}
