package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/snapshot"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/telemetry"
)

// Retention bounds how long job runs and overlay layers stay in the store.
// A zero field takes its DefaultRetention value.
type Retention struct {
	// Runs is how long a terminal run record (runs/<job_id>) is kept after
	// its last status update. A run that is not terminal is never removed.
	Runs time.Duration
	// Layers is how long a cached overlay lower layer
	// (cache/workspaces/<key>) is kept after the last job that used it
	// started. A layer named by a run that is kept stays regardless.
	Layers time.Duration
}

// DefaultRetention keeps terminal runs 7 days and unused layers 1 day.
var DefaultRetention = Retention{Runs: 7 * 24 * time.Hour, Layers: 24 * time.Hour}

// Temporary names inside CacheDir: a layer being filled (snapshot's
// ".fill-") and a layer Retain is removing.
const (
	fillPrefix  = ".fill-"
	trashPrefix = ".trash-"
)

// Retain removes terminal runs older than p.Runs and overlay layers that
// no kept run names and no job used for p.Layers, and returns what it
// removed (job ids, and layers as cache/workspaces/<key>). Layers are
// decided under the cache's exclusive lock, so a job that has picked a
// layer has either marked it used or named it in its snapshot.json, and a
// job that comes after fills the layer again.
func (r *Runner) Retain(now time.Time, p Retention) ([]string, error) {
	if p.Runs <= 0 {
		p.Runs = DefaultRetention.Runs
	}
	if p.Layers <= 0 {
		p.Layers = DefaultRetention.Layers
	}
	removed, err := r.retainRuns(now, p.Runs)
	if err != nil {
		return removed, err
	}
	layers, err := r.retainLayers(now, p.Layers)
	return append(removed, layers...), err
}

// RetainEvery runs Retain now and then every interval until ctx ends,
// logging what it removed.
func (r *Runner) RetainEvery(ctx context.Context, interval time.Duration, p Retention) {
	t := time.NewTicker(interval)
	defer t.Stop()
	now := time.Now()
	for {
		removed, err := r.Retain(now, p)
		if err != nil {
			r.log.Warn("retention failed", "error", err)
		}
		if len(removed) > 0 {
			r.log.Info("retention removed job runs and overlay layers", "removed", removed)
		}
		select {
		case <-ctx.Done():
			return
		case now = <-t.C:
		}
	}
}

// retainRuns is the store's retention (store.Records.Retain) for job
// runs: terminal ones whose last status update is older than age go; a
// run this process or another is executing never does.
func (r *Runner) retainRuns(now time.Time, age time.Duration) ([]string, error) {
	runs, err := r.store.Records(store.Jobs)
	if err != nil {
		return nil, err
	}
	return runs.Retain(now, store.Expiry{
		Ended: func(id string) (store.Ending, error) {
			rec, err := r.store.ReadStatus(id)
			if err != nil {
				return store.Ending{}, err
			}
			return store.Ending{Terminal: rec.Status.Terminal(), At: rec.UpdatedAt, Keep: age}, nil
		},
		Busy: func(id string) bool {
			_, running := r.active.Load(id)
			return running
		},
		Skipped: func(id string, err error) {
			// Left for an operator, who is told; a record still being
			// written has no status.json yet and is not worth a line.
			if job.CodeOf(err) != job.CodeJobNotFound {
				r.log.Warn("retention skips a run whose status is unreadable", telemetry.KeyJobID, id, "error", err)
			}
		},
	})
}

func (r *Runner) retainLayers(now time.Time, age time.Duration) ([]string, error) {
	cache := filepath.Join(r.store.Dir(), CacheDir)
	if _, err := os.Stat(cache); os.IsNotExist(err) {
		return nil, nil
	}
	unlock, err := lockCache(cache, true)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		unlock()
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot list the overlay layers")
	}
	used, err := r.referencedLayers(cache)
	if err != nil {
		unlock()
		return nil, err
	}
	var removed, trash []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, fillPrefix), strings.HasPrefix(name, trashPrefix):
			// No fill runs while the lock is exclusive: these are left
			// over from a process that died.
			trash = append(trash, name)
			continue
		}
		info, err := e.Info()
		if err != nil || used[name] || now.Sub(info.ModTime()) <= age {
			continue
		}
		if err := os.Rename(filepath.Join(cache, name), filepath.Join(cache, trashPrefix+name)); err != nil {
			unlock()
			return removed, job.Wrap(job.CodeRunIOFailed, err, "cannot remove an unused overlay layer").With("layer", name)
		}
		trash = append(trash, trashPrefix+name)
		removed = append(removed, filepath.ToSlash(filepath.Join(CacheDir, name)))
	}
	// Renamed away, the layers are out of every job's reach: remove them
	// without holding up the jobs waiting for the lock.
	unlock()
	for _, name := range trash {
		if err := os.RemoveAll(filepath.Join(cache, name)); err != nil {
			return removed, job.Wrap(job.CodeRunIOFailed, err, "cannot remove an unused overlay layer").With("layer", name)
		}
	}
	return removed, nil
}

// referencedLayers returns the names of the layers under cache that the
// snapshot.json of a stored run names. Only overlay runs (those with an
// overlay/ directory) are read: a copy run's manifest lists every entry.
func (r *Runner) referencedLayers(cache string) (map[string]bool, error) {
	ids, err := r.store.List()
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, id := range ids {
		dir := r.store.RunDir(id)
		if _, err := os.Stat(filepath.Join(dir, "overlay")); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, SnapshotManifestFile))
		if err != nil {
			continue
		}
		var m snapshot.Manifest
		if json.Unmarshal(b, &m) != nil || m.Lower == "" {
			continue
		}
		layer := filepath.Dir(filepath.Clean(m.Lower))
		if filepath.Dir(layer) == cache {
			used[filepath.Base(layer)] = true
		}
	}
	return used, nil
}

// lockCache creates cache if needed and flocks its lock file, shared or
// exclusive, returning the release. The lock file lies beside the cache
// (cache/workspaces.lock), which holds only layers; every job holds it
// shared while it picks its layer, Retain exclusively while it removes.
func lockCache(cache string, exclusive bool) (func(), error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, job.Wrap(job.CodeSnapshotFailed, err, "cannot create the overlay layer cache")
	}
	f, err := os.OpenFile(cache+".lock", os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, job.Wrap(job.CodeSnapshotFailed, err, "cannot open the overlay layer cache lock")
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, job.Wrap(job.CodeSnapshotFailed, err, "cannot lock the overlay layer cache")
	}
	// Closing releases the lock; nothing was written to the file, so its
	// error tells nothing.
	return func() { f.Close() }, nil
}

// markLayerUsed sets the modification time of the layer holding lower to
// now: Retain measures a layer's idle time from it.
func markLayerUsed(lower string) error {
	now := time.Now()
	return os.Chtimes(filepath.Dir(lower), now, now)
}
