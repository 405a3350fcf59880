// Package artifact collects the files a job opted into with
// policy.artifact_globs. Collection is defensive: only regular files are
// taken (never through a symlink), protected paths and caller deny globs are
// refused, count, per-file and total caps are enforced, and every accepted
// file is copied into the run record with its SHA-256.
package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/agent-runner/agent-runner/job"
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
// dirs (a whiteout in a higher layer hides the path below). A cap overflow
// returns a policy.artifact_denied error together with what was collected.
func Collect(ctx context.Context, layers []string, globs, deny []string, lim Limits, destDir string) (Result, error) {
	var res Result
	res.Artifacts = []job.Artifact{}
	if len(globs) == 0 {
		return res, nil
	}
	files, denied, err := match(layers, globs, deny)
	res.Denied = denied
	if err != nil {
		return res, job.Wrap(job.CodeArtifactFailed, err, "artifact scan failed")
	}
	res.Artifacts, err = copyAll(ctx, files, lim, destDir)
	return res, err
}

// copyAll copies the matched files into destDir within the caps and
// returns what it copied.
func copyAll(ctx context.Context, files []candidate, lim Limits, destDir string) ([]job.Artifact, error) {
	out := []job.Artifact{}
	var total int64
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return out, job.Wrap(job.CodeArtifactFailed, err, "artifact collection canceled")
		}
		if lim.MaxCount > 0 && int64(len(out)) >= lim.MaxCount {
			return out, job.Errorf(job.CodeArtifactDenied, "artifact count exceeds max_artifact_count").
				With("path", f.rel).With("limit", lim.MaxCount)
		}
		if lim.MaxFileBytes > 0 && f.size > lim.MaxFileBytes {
			return out, job.Errorf(job.CodeArtifactDenied, "artifact exceeds max_artifact_file_bytes").
				With("path", f.rel).With("limit", lim.MaxFileBytes).With("size_bytes", f.size)
		}
		if lim.MaxBytes > 0 && total+f.size > lim.MaxBytes {
			return out, job.Errorf(job.CodeArtifactDenied, "artifacts exceed max_artifact_bytes").
				With("path", f.rel).With("limit", lim.MaxBytes)
		}
		dest := filepath.Join(destDir, filepath.FromSlash(f.rel))
		// A file can grow between the scan and the copy (a process the job
		// left behind): never copy more than either cap still allows.
		bound := int64(-1) // unbounded
		if lim.MaxFileBytes > 0 {
			bound = lim.MaxFileBytes
		}
		if lim.MaxBytes > 0 && (bound < 0 || lim.MaxBytes-total < bound) {
			bound = lim.MaxBytes - total
		}
		size, sum, err := copyOut(f.abs, dest, bound)
		if errors.Is(err, errGrew) {
			return out, job.Errorf(job.CodeArtifactDenied, "artifact grew past its cap while it was copied").
				With("path", f.rel).With("limit", bound)
		}
		if err != nil {
			return out, job.Wrap(job.CodeArtifactFailed, err, "artifact copy failed").With("path", f.rel)
		}
		total += size
		out = append(out, job.Artifact{
			Path: f.rel, Kind: "file", SizeBytes: size, SHA256: sum,
			StorageURI: (&url.URL{Scheme: "file", Path: dest}).String(),
		})
	}
	return out, nil
}

type candidate struct {
	rel, abs string
	size     int64
}

// match walks the layers and returns matching regular files in path order.
func match(layers, globs, deny []string) ([]candidate, []string, error) {
	seen := map[string]bool{} // rel paths decided by a higher layer
	var files []candidate
	var denied []string
	for _, layer := range layers {
		err := filepath.WalkDir(layer, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) && p == layer {
					return filepath.SkipDir
				}
				return err
			}
			rel, _ := filepath.Rel(layer, p)
			rel = filepath.ToSlash(rel)
			if rel == "." {
				return nil
			}
			if d.IsDir() {
				if snapshot.Protected(rel) {
					return filepath.SkipDir
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
			info, err := d.Info()
			if err != nil {
				return err
			}
			switch {
			case whiteout(info):
				return nil
			case snapshot.Protected(rel):
				denied = append(denied, rel+": protected path")
			case matchAny(deny, rel):
				denied = append(denied, rel+": matches artifact_deny_globs")
			case info.Mode()&fs.ModeSymlink != 0:
				denied = append(denied, rel+": symlinks are never collected")
			case !info.Mode().IsRegular():
				denied = append(denied, rel+": not a regular file")
			default:
				files = append(files, candidate{rel: rel, abs: p, size: info.Size()})
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
func whiteout(info fs.FileInfo) bool {
	if info.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// errGrew reports a file that grew past its bound while it was copied.
var errGrew = errors.New("file grew past its cap while copying")

// copyOut copies one file without following symlinks and never more than
// max bytes (max < 0: unbounded).
func copyOut(from, to string, max int64) (int64, string, error) {
	in, err := os.OpenFile(from, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0, "", err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0, "", fmt.Errorf("%s is not a regular file", from)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return 0, "", err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, "", err
	}
	var r io.Reader = in
	if max >= 0 {
		r = io.LimitReader(in, max+1)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, "", err
	}
	if max >= 0 && n > max {
		os.Remove(to)
		return n, "", errGrew
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
