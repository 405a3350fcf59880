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
	"sync"
	"syscall"

	"github.com/agent-runner/agent-runner/job"
)

// Manifest describes a finished snapshot.
type Manifest struct {
	SHA256 string `json:"sha256"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
	Skips  []Skip `json:"skipped,omitempty"`
	// Entries lists every copied entry with its content hash, so a replay
	// can verify the snapshot it reuses.
	Entries []Record `json:"entries,omitempty"`
	// Lower is set instead of Entries for an overlay snapshot: the cached
	// layer the job ran on (its own manifest lists the entries).
	Lower string `json:"lower,omitempty"`
}

// Record is one entry of a snapshot manifest.
type Record struct {
	Path   string `json:"path"`
	Type   string `json:"type"` // "dir", "file" or "symlink"
	Mode   string `json:"mode"`
	SHA256 string `json:"sha256,omitempty"`
	Target string `json:"target,omitempty"`
}

// copyWorkers bounds concurrent file copies.
const copyWorkers = 4

// Copy snapshots src into dst (which must not exist or be empty) and
// returns the manifest. File modes keep only permission bits; setuid,
// setgid and sticky bits are dropped.
func Copy(ctx context.Context, src, dst string, opt Options) (Manifest, error) {
	var m Manifest
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return m, job.Wrap(job.CodeSnapshotFailed, err, "cannot create snapshot directory")
	}
	var entries []Entry
	skips, err := Walk(ctx, src, opt, func(e Entry) error {
		if e.Mode.IsDir() && len(opt.Include) > 0 {
			return nil // with includes, directories exist only as parents
		}
		if e.Mode.IsRegular() {
			m.Files++
			m.Bytes += e.Size
			if opt.MaxFiles > 0 && m.Files > opt.MaxFiles {
				return job.Errorf(job.CodeSnapshotFailed, "workspace has more than %d files", opt.MaxFiles)
			}
			if opt.MaxBytes > 0 && m.Bytes > opt.MaxBytes {
				return job.Errorf(job.CodeSnapshotFailed, "workspace is larger than %d bytes", opt.MaxBytes)
			}
		}
		entries = append(entries, e)
		return nil
	})
	m.Skips = skips
	if err != nil {
		return m, snapshotErr(err)
	}
	sums := make([]string, len(entries))
	// Directories and symlinks first, in order, so files have parents.
	for _, e := range entries {
		target := filepath.Join(dst, filepath.FromSlash(e.Rel))
		switch {
		case e.Mode.IsDir():
			if err := os.MkdirAll(target, e.Mode.Perm()|0o700); err != nil {
				return m, snapshotErr(err)
			}
		case e.Mode&fs.ModeSymlink != 0:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return m, snapshotErr(err)
			}
			if err := os.Symlink(e.Target, target); err != nil {
				return m, snapshotErr(err)
			}
		default:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return m, snapshotErr(err)
			}
		}
	}
	if err := copyFiles(ctx, src, dst, entries, sums); err != nil {
		return m, snapshotErr(err)
	}
	m.SHA256 = digest(entries, sums)
	m.Entries = records(entries, sums)
	return m, nil
}

func snapshotErr(err error) error {
	if _, ok := err.(*job.Error); ok {
		return err
	}
	if err == context.Canceled || err == context.DeadlineExceeded {
		return job.Wrap(job.CodeRunCanceled, err, "snapshot canceled")
	}
	return job.Wrap(job.CodeSnapshotFailed, err, "workspace snapshot failed")
}

func copyFiles(ctx context.Context, src, dst string, entries []Entry, sums []string) error {
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
		work     = make(chan int)
	)
	for w := 0; w < copyWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				e := entries[i]
				sum, err := copyFile(filepath.Join(src, filepath.FromSlash(e.Rel)), filepath.Join(dst, filepath.FromSlash(e.Rel)), e.Mode.Perm())
				if err != nil {
					once.Do(func() { firstErr = err })
					continue
				}
				sums[i] = sum
			}
		}()
	}
	for i, e := range entries {
		if !e.Mode.IsRegular() {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// copyFile copies one regular file without following a symlink swapped in
// after the walk (O_NOFOLLOW) or blocking on a FIFO swapped in
// (O_NONBLOCK, then fstat: regular files only) and returns its SHA-256.
func copyFile(from, to string, perm fs.FileMode) (string, error) {
	in, err := os.OpenFile(from, os.O_RDONLY|noFollow|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is no longer a regular file", from)
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// digest combines the entries into the workspace_snapshot_sha256. Each line
// is "<type> <perm> <path>\x00<content sha256 or link target>\n".
func digest(entries []Entry, sums []string) string {
	h := sha256.New()
	for i, e := range entries {
		var kind byte
		var body string
		switch {
		case e.Mode.IsDir():
			kind = 'd'
		case e.Mode&fs.ModeSymlink != 0:
			kind, body = 'l', e.Target
		default:
			kind, body = 'f', sums[i]
		}
		fmt.Fprintf(h, "%c %04o %s\x00%s\n", kind, e.Mode.Perm(), e.Rel, body)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func records(entries []Entry, sums []string) []Record {
	out := make([]Record, len(entries))
	for i, e := range entries {
		r := Record{Path: e.Rel, Mode: fmt.Sprintf("%04o", e.Mode.Perm())}
		switch {
		case e.Mode.IsDir():
			r.Type = "dir"
		case e.Mode&fs.ModeSymlink != 0:
			r.Type, r.Target = "symlink", e.Target
		default:
			r.Type, r.SHA256 = "file", sums[i]
		}
		out[i] = r
	}
	return out
}
