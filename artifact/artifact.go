// Package artifact collects the files a job opted into with
// policy.artifact_globs. Collection is defensive: only regular files are
// taken (never through a symlink), protected paths and caller deny globs are
// refused, files past the count, per-file and total caps are skipped (and
// listed; the caps never change a job's verdict), and every accepted file
// is copied into the run record with its SHA-256.
package artifact

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/snapshot"
)

// Limits are the artifact caps of a job.
type Limits struct {
	MaxCount     int64
	MaxFileBytes int64
	MaxBytes     int64
}

// Result is what collection produced: accepted artifacts, the reasons
// other matches were refused, and the matches left out by the caps.
type Result struct {
	Artifacts []job.Artifact
	Denied    []string
	Skipped   []job.SkippedArtifact
}

// Collect matches globs against the job's workspace and copies accepted
// files to destDir. layers lists the workspace's directories from the top
// down: one directory for a copy snapshot, or an overlay's upper and lower
// dirs (a whiteout in a higher layer hides the path below). The job wrote
// the layers, so they are walked and read through package safecopy:
// fd-relative, never through a symlink in any component, regular files
// only (a FIFO or device swapped in after the scan is refused, never
// blocked on), and capped on the bytes read.
//
// The caps select, they do not judge: in path order, a file that does not
// fit the count, per-file or total cap still left is skipped and listed
// in Result.Skipped, and collection goes on with the next. Only a failure
// to read or write (run.artifact_collection_failed) is an error.
func Collect(ctx context.Context, layers []string, globs, deny []string, lim Limits, destDir string) (Result, error) {
	var res Result
	res.Artifacts = []job.Artifact{}
	if len(globs) == 0 {
		return res, nil
	}
	roots, err := openLayers(layers)
	if err != nil {
		return res, job.Wrap(job.CodeArtifactFailed, err, "artifact scan failed")
	}
	defer func() {
		for _, r := range roots {
			r.Close()
		}
	}()
	files, denied, err := match(ctx, roots, globs, deny)
	res.Denied = denied
	if err != nil {
		return res, job.Wrap(job.CodeArtifactFailed, err, "artifact scan failed")
	}
	c := collection{roots: roots, lim: lim, destDir: destDir, artifacts: []job.Artifact{}}
	err = c.copyAll(ctx, files)
	res.Artifacts, res.Skipped = c.artifacts, c.skipped
	res.Denied = append(res.Denied, c.denied...)
	return res, err
}

// openLayers opens every layer that exists (an overlay's upper dir may
// not).
func openLayers(layers []string) ([]*safecopy.Root, error) {
	var roots []*safecopy.Root
	for _, layer := range layers {
		r, err := safecopy.OpenRoot(layer)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			for _, r := range roots {
				r.Close()
			}
			return nil, err
		}
		roots = append(roots, r)
	}
	return roots, nil
}

// collection is one Collect's copying state.
type collection struct {
	roots     []*safecopy.Root
	lim       Limits
	destDir   string
	total     int64
	artifacts []job.Artifact
	// denied are files that stopped being regular files (or started going
	// through a symlink) after the scan.
	denied  []string
	skipped []job.SkippedArtifact
}

// copyAll copies the matched files into destDir within the caps.
func (c *collection) copyAll(ctx context.Context, files []candidate) error {
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return job.Wrap(job.CodeArtifactFailed, err, "artifact collection canceled")
		}
		if err := c.copyOne(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// skip records f as left out by the cap named reason.
func (c *collection) skip(f candidate, reason string, limit int64) {
	c.skipped = append(c.skipped, job.SkippedArtifact{Path: f.rel, Reason: reason, SizeBytes: f.size, Limit: limit})
}

func (c *collection) copyOne(ctx context.Context, f candidate) error {
	lim := c.lim
	switch {
	case lim.MaxCount > 0 && int64(len(c.artifacts)) >= lim.MaxCount:
		c.skip(f, job.SkipMaxArtifactCount, lim.MaxCount)
		return nil
	case lim.MaxFileBytes > 0 && f.size > lim.MaxFileBytes:
		c.skip(f, job.SkipMaxArtifactFileBytes, lim.MaxFileBytes)
		return nil
	case lim.MaxBytes > 0 && c.total+f.size > lim.MaxBytes:
		c.skip(f, job.SkipMaxArtifactBytes, lim.MaxBytes)
		return nil
	}
	dest := filepath.Join(c.destDir, filepath.FromSlash(f.rel))
	// A file can grow between the scan and the copy (a process the job
	// left behind): never copy more than either cap still allows.
	bound := safecopy.NoLimit
	if lim.MaxFileBytes > 0 {
		bound = lim.MaxFileBytes
	}
	if lim.MaxBytes > 0 && (bound < 0 || lim.MaxBytes-c.total < bound) {
		bound = lim.MaxBytes - c.total
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return job.Wrap(job.CodeArtifactFailed, err, "artifact copy failed").With("path", f.rel)
	}
	cp, err := c.roots[f.layer].CopyFile(ctx, f.rel, dest, 0o600, bound) // the store is private (store.RecordFileMode)
	switch {
	case errors.Is(err, safecopy.ErrTooLarge):
		// CopyFile left nothing at dest.
		c.skip(f, job.SkipGrewPastCap, bound)
		return nil
	case errors.Is(err, safecopy.ErrSymlink):
		c.denied = append(c.denied, f.rel+": symlinks are never collected")
		return nil
	case errors.Is(err, safecopy.ErrNotRegular):
		c.denied = append(c.denied, f.rel+": not a regular file")
		return nil
	case err != nil:
		return job.Wrap(job.CodeArtifactFailed, err, "artifact copy failed").With("path", f.rel)
	}
	c.total += cp.Size
	c.artifacts = append(c.artifacts, job.Artifact{
		Path: f.rel, Kind: "file", SizeBytes: cp.Size, SHA256: cp.SHA256,
		StorageURI: (&url.URL{Scheme: "file", Path: dest}).String(),
	})
	return nil
}

// candidate is a matched regular file: its path in roots[layer] and its
// size when it was scanned.
type candidate struct {
	layer int
	rel   string
	size  int64
}

// match walks the layers and returns matching regular files in path order.
func match(ctx context.Context, roots []*safecopy.Root, globs, deny []string) ([]candidate, []string, error) {
	seen := map[string]bool{} // rel paths decided by a higher layer
	var files []candidate
	var denied []string
	for i, root := range roots {
		err := root.Walk(ctx, func(rel string, info safecopy.Info) error {
			if info.Mode.IsDir() {
				if snapshot.Protected(rel) {
					return fs.SkipDir
				}
				return nil
			}
			if seen[rel] {
				return nil
			}
			seen[rel] = true
			if !matchAny(globs, rel) {
				return nil
			}
			switch {
			case whiteout(info):
				return nil
			case snapshot.Protected(rel):
				denied = append(denied, rel+": protected path")
			case matchAny(deny, rel):
				denied = append(denied, rel+": matches artifact_deny_globs")
			case info.Mode&fs.ModeSymlink != 0:
				denied = append(denied, rel+": symlinks are never collected")
			case !info.Mode.IsRegular():
				denied = append(denied, rel+": not a regular file")
			default:
				files = append(files, candidate{layer: i, rel: rel, size: info.Size})
			}
			return nil
		})
		if err != nil {
			return nil, denied, err
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	return files, denied, nil
}

func matchAny(globs []string, rel string) bool {
	for _, g := range globs {
		if doublestar.MatchUnvalidated(g, rel) {
			return true
		}
	}
	return false
}

// whiteout reports an overlayfs whiteout: a 0/0 character device.
func whiteout(info safecopy.Info) bool {
	return info.Mode&fs.ModeCharDevice != 0 && info.Rdev == 0
}
