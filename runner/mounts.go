package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/telemetry"
	"github.com/agent-runner/agent-runner/validation"
)

// CachesDir is where workspace.caches live inside the store.
const CachesDir = "caches"

// Log attribute keys of the cache stage.
const (
	logCache   = "cache"
	logBytes   = "bytes"
	logEvicted = "evicted"
	logRemoved = "removed"
)

// binds resolves the request's read-only mounts (again: the workspace may
// have changed since validation), records their digest and leases its
// caches. release gives the caches back and trims them; it must be called
// once the backend returned, also after an error.
func (e *execution) binds(ctx context.Context) (binds []backend.Bind, release func(), err error) {
	release = func() {}
	w := e.req.Workspace
	root := e.opts.MountRoot
	if root == "" {
		root = w.Path
	}
	var sources []string
	for _, rel := range w.ReadOnlyMounts {
		src, err := validation.MountSource(root, rel)
		if err != nil {
			return nil, release, err
		}
		sources = append(sources, src)
		binds = append(binds, backend.Bind{Source: src, Target: rel, ReadOnly: true})
	}
	if len(sources) > 0 {
		sum, err := mountsDigest(ctx, w.ReadOnlyMounts, sources)
		if err != nil {
			return nil, release, job.Wrap(job.CodeSnapshotFailed, err, "cannot list the read-only mounts")
		}
		e.res.Replay.ReadOnlyMountsSHA256 = sum
	}
	var leases []*buildcache.Lease
	release = func() {
		for i, l := range leases {
			l.Release()
			e.r.trimCache(w.Caches[i].Name, e.req.JobID)
		}
	}
	for _, c := range w.Caches {
		l, err := e.r.caches.Acquire(c.Name)
		if err != nil {
			return nil, release, job.Wrap(job.CodeBackendSetupFailed, err, "cannot open the build cache").With("cache", c.Name)
		}
		leases = append(leases, l)
		binds = append(binds, backend.Bind{Source: l.Dir, Target: c.Path})
	}
	return binds, release, nil
}

// trimCache enforces the cache size cap after job jobID (logged, never a
// job error: the job's result does not depend on it).
func (r *Runner) trimCache(name, jobID string) {
	t, err := r.caches.Trim(name, r.cfg.CacheMaxBytes)
	switch {
	case err != nil:
		r.log.Warn("cache trim failed", logCache, name, telemetry.KeyJobID, jobID, "error", err)
	case t.Evicted > 0:
		r.log.Info("cache trimmed", logCache, name, telemetry.KeyJobID, jobID, logBytes, t.Bytes, logEvicted, t.Evicted)
	}
}

// CollectCaches removes the build caches no job used for CacheMaxAge. New
// calls it; a long-running server calls it periodically.
func (r *Runner) CollectCaches() {
	removed, err := r.caches.Collect(time.Now(), r.cfg.CacheMaxAge)
	if err != nil {
		r.log.Warn("cache collection failed", "error", err)
	}
	if len(removed) > 0 {
		r.log.Info("caches collected", logRemoved, removed)
	}
}

// mountExcludes are exclusion globs for the read-only mounts: bound, never
// copied into the snapshot.
func mountExcludes(w job.Workspace) []string {
	out := append([]string{}, w.Exclude...)
	for _, m := range w.ReadOnlyMounts {
		out = append(out, escapeGlob(m)+"/**")
	}
	return out
}

func escapeGlob(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[]{}\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// mountsDigest identifies the state of the read-only mounts cheaply: one
// line per entry, in walk order, with its kind, size and modification
// time, not its content. A file changed in place within the same
// nanosecond and size is not seen; replay reports the digest, it does not
// restore the mounts.
func mountsDigest(ctx context.Context, rels, sources []string) (string, error) {
	h := sha256.New()
	for i, src := range sources {
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p) // p is src or beneath it
			fmt.Fprintf(h, "%s %s %d %d\x00", path.Join(rels[i], filepath.ToSlash(rel)), info.Mode().Type(), info.Size(), info.ModTime().UnixNano())
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CollectCachesEvery runs CollectCaches every interval until ctx ends (a
// server's hourly garbage collection of build caches).
func (r *Runner) CollectCachesEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.CollectCaches()
		}
	}
}
