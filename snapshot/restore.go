package snapshot

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/safepath"
)

// Restore copies the entries of manifest m from a stored snapshot dir into
// dst, verifying each file's SHA-256, and fails if anything differs (a job
// may have modified its own snapshot). Paths come from the manifest, so
// they are re-checked with safepath before use, and src is read through
// package safecopy: no symlink is followed in any component (an entry
// "a/passwd" under a job-made "a -> /etc" is refused), a FIFO or device
// where a file was is refused without blocking, and the files together may
// not hold more bytes than the manifest recorded, counted on the bytes
// read (a sparse file swapped in is cut off, not copied).
func Restore(ctx context.Context, src, dst string, m Manifest) error {
	root, err := safecopy.OpenRoot(src)
	if err != nil {
		return job.Wrap(job.CodeSnapshotFailed, err, "cannot open the stored snapshot")
	}
	defer root.Close()
	left := max(m.Bytes, 0) // bytes the manifest's files may still hold
	for _, r := range m.Entries {
		if err := ctx.Err(); err != nil {
			return snapshotErr(err)
		}
		rel, err := safepath.Clean(r.Path)
		if err != nil || rel == "." {
			return job.Errorf(job.CodeSnapshotFailed, "manifest entry %q: %v", r.Path, err)
		}
		mode, _ := strconv.ParseUint(r.Mode, 8, 32)
		to := filepath.Join(dst, filepath.FromSlash(rel))
		switch r.Type {
		case "dir":
			if err := os.MkdirAll(to, fs.FileMode(mode)|0o700); err != nil {
				return snapshotErr(err)
			}
		case "symlink":
			if !symlinkInside(rel, r.Target) {
				return job.Errorf(job.CodeSnapshotFailed, "manifest symlink %q escapes", rel)
			}
			os.MkdirAll(filepath.Dir(to), 0o755)
			if err := os.Symlink(r.Target, to); err != nil {
				return snapshotErr(err)
			}
		case "file":
			os.MkdirAll(filepath.Dir(to), 0o755)
			c, err := root.CopyFile(ctx, rel, to, fs.FileMode(mode).Perm(), left)
			if err != nil {
				return job.Wrap(job.CodeSnapshotFailed, err, "cannot restore "+rel+" from the stored snapshot")
			}
			left -= c.Size
			if c.SHA256 != r.SHA256 {
				return job.Errorf(job.CodeSnapshotFailed, "%s changed since the snapshot was taken", rel)
			}
		default:
			return job.Errorf(job.CodeSnapshotFailed, "manifest entry %q has unknown type %q", rel, r.Type)
		}
	}
	return nil
}

// Hash computes the workspace_snapshot_sha256 of src without copying it,
// reading src the way Copy does (from one descriptor, no symlink followed
// at any level, each file the one the walk listed).
func Hash(ctx context.Context, src string, opt Options) (string, error) {
	root, err := safecopy.OpenRoot(src)
	if err != nil {
		return "", err
	}
	defer root.Close()
	var entries []Entry
	if _, err := walk(ctx, root, opt, func(e Entry) error {
		if e.Mode.IsDir() && len(opt.Include) > 0 {
			return nil
		}
		entries = append(entries, e)
		return nil
	}); err != nil {
		return "", err
	}
	sums := make([]string, len(entries))
	for i, e := range entries {
		if !e.Mode.IsRegular() {
			continue
		}
		c, err := root.SumListed(ctx, e.Rel, e.seen(), fileCap(opt))
		if err != nil {
			return "", err
		}
		sums[i] = c.SHA256
	}
	return digest(entries, sums), nil
}
