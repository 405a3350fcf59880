package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
)

// Cache file names inside one cached layer directory.
const (
	layerTree     = "tree"
	layerManifest = "manifest.json"
)

// OverlayLower returns the read-only lower layer for src: a copy made
// once per workspace state and reused by every later job on that state, so
// the per-job snapshot cost is a stat walk, not a copy. Layers live under
// cacheDir, keyed by a fingerprint of the selected entries' paths, modes,
// sizes, mtimes and inodes (plus the include/exclude globs); the returned
// manifest carries the content hash computed when the layer was filled,
// which is the job's workspace_snapshot_sha256. A file changed in place
// with its size and mtime preserved would keep the fingerprint; that is
// the same trade-off build tools make with stat caches.
//
// src is opened once and read, for the fingerprint and for the fill, the
// way Copy reads it: beneath that descriptor, no symlink followed at any
// level, every file the one the walk listed.
func OverlayLower(ctx context.Context, cacheDir, src string, opt Options) (string, Manifest, error) {
	root, err := safecopy.OpenRoot(src)
	if err != nil {
		return "", Manifest{}, job.Wrap(job.CodeSnapshotFailed, err, "cannot open the workspace")
	}
	defer root.Close()
	key, err := fingerprint(ctx, root, opt)
	if err != nil {
		return "", Manifest{}, snapshotErr(err)
	}
	dir := filepath.Join(cacheDir, key)
	if m, err := readLayer(dir); err == nil {
		return filepath.Join(dir, layerTree), m, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", Manifest{}, snapshotErr(err)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".fill-")
	if err != nil {
		return "", Manifest{}, snapshotErr(err)
	}
	os.Chmod(tmp, 0o755)
	m, err := copyTree(ctx, root, filepath.Join(tmp, layerTree), opt)
	if err != nil {
		os.RemoveAll(tmp)
		return "", Manifest{}, err
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(tmp, layerManifest), b, 0o644); err != nil {
		os.RemoveAll(tmp)
		return "", Manifest{}, snapshotErr(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another job filled the same layer first: use it.
		os.RemoveAll(tmp)
		if m, err := readLayer(dir); err == nil {
			return filepath.Join(dir, layerTree), m, nil
		}
		return "", Manifest{}, snapshotErr(err)
	}
	return filepath.Join(dir, layerTree), m, nil
}

// LayerManifest reads the full manifest of the layer whose tree is lower.
func LayerManifest(lower string) (Manifest, error) { return readLayer(filepath.Dir(lower)) }

func readLayer(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, layerManifest))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, err
	}
	if m.SHA256 == "" {
		return m, fmt.Errorf("layer manifest without a hash")
	}
	return m, nil
}
