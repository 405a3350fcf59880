// Package artifact collects the files a job opted into with
// policy.artifact_globs. Collection is defensive: only regular files are
// taken (never through a symlink), protected paths and caller deny globs are
// refused, count, per-file and total caps are enforced, and every accepted
// file is copied into the run record with its SHA-256.
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

// Result is what collection produced: accepted artifacts and the reasons
// other matches were refused.
type Result struct {
	Artifacts []job.Artifact
	Denied    []string
}

// Collect matches globs against the job's workspace and copies accepted
// files to destDir. layers lists the workspace's directories from the top
// down: one directory for a copy snapshot, or an overlay's upper and lower
// dirs (a whiteout in a higher layer hides the path below). The job wrote
// the layers, so they are walked and read through package safecopy:
// fd-relative, never through a symlink in any component, regular files
// only (a FIFO or device swapped in after the scan is refused, never
// blocked on), and capped on the bytes read. A cap overflow returns a
// policy.artifact_denied error together with what was collected.
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
	var late []string
	res.Artifacts, late, err = copyAll(ctx, roots, files, lim, destDir)
	res.Denied = append(res.Denied, late...)
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

// copyAll copies the matched files into destDir within the caps and
// returns what it copied, and the files refused because they stopped being
// regular files (or started going through a symlink) after the scan.
func copyAll(ctx context.Context, roots []*safecopy.Root, files []candidate, lim Limits, destDir string) ([]job.Artifact, []string, error) {
	out := []job.Artifact{}
	var denied []string
	var total int64
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return out, denied, job.Wrap(job.CodeArtifactFailed, err, "artifact collection canceled")
		}
		if lim.MaxCount > 0 && int64(len(out)) >= lim.MaxCount {
			return out, denied, job.Errorf(job.CodeArtifactDenied, "artifact count exceeds max_artifact_count").
				With("path", f.rel).With("limit", lim.MaxCount)
		}
		if lim.MaxFileBytes > 0 && f.size > lim.MaxFileBytes {
			return out, denied, job.Errorf(job.CodeArtifactDenied, "artifact exceeds max_artifact_file_bytes").
				With("path", f.rel).With("limit", lim.MaxFileBytes).With("size_bytes", f.size)
		}
		if lim.MaxBytes > 0 && total+f.size > lim.MaxBytes {
			return out, denied, job.Errorf(job.CodeArtifactDenied, "artifacts exceed max_artifact_bytes").
				With("path", f.rel).With("limit", lim.MaxBytes)
		}
		dest := filepath.Join(destDir, filepath.FromSlash(f.rel))
		// A file can grow between the scan and the copy (a process the job
		// left behind): never copy more than either cap still allows.
		bound := safecopy.NoLimit
		if lim.MaxFileBytes > 0 {
			bound = lim.MaxFileBytes
		}
		if lim.MaxBytes > 0 && (bound < 0 || lim.MaxBytes-total < bound) {
			bound = lim.MaxBytes - total
		}
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return out, denied, job.Wrap(job.CodeArtifactFailed, err, "artifact copy failed").With("path", f.rel)
		}
		c, err := roots[f.layer].CopyFile(ctx, f.rel, dest, 0o644, bound)
		switch {
		case errors.Is(err, safecopy.ErrTooLarge):
			return out, denied, job.Errorf(job.CodeArtifactDenied, "artifact grew past its cap while it was copied").
				With("path", f.rel).With("limit", bound)
		case errors.Is(err, safecopy.ErrSymlink):
			denied = append(denied, f.rel+": symlinks are never collected")
			continue
		case errors.Is(err, safecopy.ErrNotRegular):
			denied = append(denied, f.rel+": not a regular file")
			continue
		case err != nil:
			return out, denied, job.Wrap(job.CodeArtifactFailed, err, "artifact copy failed").With("path", f.rel)
		}
		total += c.Size
		out = append(out, job.Artifact{
			Path: f.rel, Kind: "file", SizeBytes: c.Size, SHA256: c.SHA256,
			StorageURI: (&url.URL{Scheme: "file", Path: dest}).String(),
		})
	}
	return out, denied, nil
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
