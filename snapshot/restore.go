package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agent-runner/agent-runner/safepath"
)

// Restore copies the entries of manifest m from a stored snapshot dir into
// dst, verifying each file's SHA-256, and fails if anything differs (a job
// may have modified its own snapshot). Paths come from the manifest, so
// they are re-checked with safepath before use.
func Restore(ctx context.Context, src, dst string, m Manifest) error {
	for _, r := range m.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := safepath.Clean(r.Path)
		if err != nil || rel == "." {
			return fmt.Errorf("manifest entry %q: %w", r.Path, err)
		}
		mode, _ := strconv.ParseUint(r.Mode, 8, 32)
		to := filepath.Join(dst, filepath.FromSlash(rel))
		from := filepath.Join(src, filepath.FromSlash(rel))
		switch r.Type {
		case "dir":
			if err := os.MkdirAll(to, fs.FileMode(mode)|0o700); err != nil {
				return err
			}
		case "symlink":
			if !symlinkInside(rel, r.Target) {
				return fmt.Errorf("manifest symlink %q escapes", rel)
			}
			os.MkdirAll(filepath.Dir(to), 0o755)
			if err := os.Symlink(r.Target, to); err != nil {
				return err
			}
		case "file":
			os.MkdirAll(filepath.Dir(to), 0o755)
			sum, err := copyFile(from, to, fs.FileMode(mode))
			if err != nil {
				return err
			}
			if sum != r.SHA256 {
				return fmt.Errorf("%s changed since the snapshot was taken", rel)
			}
		default:
			return fmt.Errorf("manifest entry %q has unknown type %q", rel, r.Type)
		}
	}
	return nil
}

// Hash computes the workspace_snapshot_sha256 of src without copying it.
func Hash(ctx context.Context, src string, opt Options) (string, error) {
	var entries []Entry
	if _, err := Walk(ctx, src, opt, func(e Entry) error {
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
		f, err := os.OpenFile(filepath.Join(src, filepath.FromSlash(e.Rel)), os.O_RDONLY|noFollow, 0)
		if err != nil {
			return "", err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
		sums[i] = hex.EncodeToString(h.Sum(nil))
	}
	return digest(entries, sums), nil
}
