package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/telemetry"
	"github.com/agent-runner/agent-runner/validation"
)

// CachesDir is where workspace.caches live inside the store.
const CachesDir = "caches"

// Log attribute keys of the cache stage.
const (
	logCache     = "cache"
	logNamespace = "namespace"
	logBytes     = "bytes"
	logInodes    = "inodes"
	logEvicted   = "evicted"
	logRemoved   = "removed"
)

// binds resolves the request's read-only mounts (again: the workspace may
// have changed since validation), records their digest and leases its
// caches in the caller's namespace (Options.CacheNamespace, shared names
// in buildcache.SharedNamespace). release gives the caches back, which
// trims them in the background; it must be called once the backend
// returned, also after an error.
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
		// Copy-on-write keeps the host directory the read-only lower
		// layer: the digest below still describes what the job read,
		// and what it wrote there stays in the sandbox.
		binds = append(binds, backend.Bind{Source: src, Target: rel, ReadOnly: true, CopyOnWrite: w.ReadOnlyMountsMode == job.MountsCopyOnWrite})
	}
	if len(sources) > 0 {
		sum, err := mountsDigest(ctx, w.ReadOnlyMounts, sources)
		if err != nil {
			return nil, release, job.Wrap(job.CodeSnapshotFailed, err, "cannot list the read-only mounts")
		}
		e.res.Replay.ReadOnlyMountsSHA256 = sum
	}
	if len(w.Caches) == 0 {
		return binds, release, nil
	}
	ns := e.opts.CacheNamespace
	if ns == "" {
		ns = buildcache.LocalNamespace
	}
	var leases []*buildcache.Lease
	release = func() {
		for _, l := range leases {
			l.Release() // trims in the background: the job does not wait
		}
	}
	for _, c := range w.Caches {
		cns := buildcache.NamespaceFor(ns, e.opts.SharedCaches, c.Name)
		l, err := e.r.caches.Acquire(cns, c.Name)
		if err != nil {
			return nil, release, job.Wrap(job.CodeBackendSetupFailed, err, "cannot open the build cache").With("cache", c.Name)
		}
		if l.NotMounted != "" {
			e.r.log.Warn("build cache not mounted: the job gets an empty directory", logCache, c.Name, logNamespace, cns,
				"reason", l.NotMounted, telemetry.KeyJobID, e.req.JobID)
		}
		leases = append(leases, l)
		binds = append(binds, backend.Bind{Source: l.Dir, Target: c.Path})
	}
	return binds, release, nil
}

// openCaches opens the store's build caches with the runner's caps.
func (r *Runner) openCaches() error {
	caches, err := buildcache.Open(filepath.Join(r.store.Dir(), CachesDir), buildcache.Options{
		MaxBytes: r.cfg.CacheMaxBytes, MaxInodes: r.cfg.CacheMaxInodes, Report: r.reportTrim,
	})
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot open the build caches")
	}
	r.caches = caches
	return nil
}

// reportTrim logs a background trim (never a job error: no job's result
// depends on it).
func (r *Runner) reportTrim(ns, name string, t buildcache.Trimmed, err error) {
	switch {
	case err != nil:
		r.log.Warn("cache trim failed", logCache, name, logNamespace, ns, "error", err)
	case t.Reset:
		r.log.Info("cache reset", logCache, name, logNamespace, ns, logBytes, t.Usage.Bytes, logInodes, t.Usage.Inodes)
	case t.Evicted > 0:
		r.log.Info("cache trimmed", logCache, name, logNamespace, ns, logBytes, t.Usage.Bytes, logInodes, t.Usage.Inodes, logEvicted, t.Evicted)
	case t.Busy:
		r.log.Info("cache over its cap but in use: not mounted until the last job trims it", logCache, name, logNamespace, ns)
	}
}

// waitCaches waits for the background trims and removals (Close).
func (r *Runner) waitCaches() {
	if r.caches != nil {
		r.caches.Wait()
	}
}

// CollectCaches removes the build caches no job used for CacheMaxAge. New
// calls it; a long-running server calls it periodically. Removed caches
// are deleted in the background.
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
// restore the mounts. Each source is read from its own descriptor with
// safecopy (no symlink followed at any level), so a directory of the
// workspace swapped for a link while it is listed never lists a host
// directory into the digest.
func mountsDigest(ctx context.Context, rels, sources []string) (string, error) {
	h := sha256.New()
	for i, src := range sources {
		root, err := safecopy.OpenRoot(src)
		if err != nil {
			return "", err
		}
		err = digestMount(ctx, h, rels[i], root)
		root.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// digestMount writes mountsDigest's lines for one mount: its root (named
// rel), then every entry below it.
func digestMount(ctx context.Context, w io.Writer, rel string, root *safecopy.Root) error {
	line := func(p string, info safecopy.Info) {
		fmt.Fprintf(w, "%s %s %d %d\x00", p, info.Mode.Type(), info.Size, info.ModTime)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	info, err := root.Stat()
	if err != nil {
		return err
	}
	line(rel, info)
	return root.Walk(ctx, func(p string, info safecopy.Info) error {
		line(path.Join(rel, p), info)
		return nil
	})
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
