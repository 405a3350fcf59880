package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
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
// setgid and sticky bits are dropped. src is read from one descriptor
// with package safecopy: the walk and every file's open resolve paths
// beneath it without following a symlink at any level, and a file is
// copied only if it is the one the walk listed (same device and inode),
// so a directory of the workspace swapped for a link to a host directory
// while the snapshot is taken never brings a host file into it (the
// snapshot fails with run.snapshot_failed instead).
func Copy(ctx context.Context, src, dst string, opt Options) (Manifest, error) {
	root, err := safecopy.OpenRoot(src)
	if err != nil {
		return Manifest{}, job.Wrap(job.CodeSnapshotFailed, err, "cannot open the workspace")
	}
	defer root.Close()
	return copyTree(ctx, root, dst, opt)
}

func copyTree(ctx context.Context, root *safecopy.Root, dst string, opt Options) (Manifest, error) {
	var m Manifest
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return m, job.Wrap(job.CodeSnapshotFailed, err, "cannot create snapshot directory")
	}
	var entries []Entry
	skips, err := walk(ctx, root, opt, func(e Entry) error {
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
	copied, err := copyFiles(ctx, root, dst, entries, sums, fileCap(opt))
	if err != nil {
		return m, snapshotErr(err)
	}
	// The bytes read, not the sizes listed: a file may have grown since
	// the walk, and Restore caps a replay on this count.
	m.Bytes = copied
	if opt.MaxBytes > 0 && m.Bytes > opt.MaxBytes {
		return m, job.Errorf(job.CodeSnapshotFailed, "workspace is larger than %d bytes", opt.MaxBytes)
	}
	m.SHA256 = digest(entries, sums)
	m.Entries = records(entries, sums)
	return m, nil
}

// fileCap bounds the bytes read from one file: a file that grows past
// the whole snapshot's cap while it is copied is cut off.
func fileCap(opt Options) int64 {
	if opt.MaxBytes > 0 {
		return opt.MaxBytes
	}
	return safecopy.NoLimit
}

func snapshotErr(err error) error {
	if _, ok := err.(*job.Error); ok {
		return err
	}
	if err == context.Canceled || err == context.DeadlineExceeded {
		return job.Wrap(job.CodeRunCanceled, err, "snapshot canceled")
	}
	if errors.Is(err, safecopy.ErrChanged) || errors.Is(err, safecopy.ErrSymlink) || errors.Is(err, safecopy.ErrNotRegular) {
		return job.Wrap(job.CodeSnapshotFailed, err, "the workspace changed while it was snapshotted")
	}
	return job.Wrap(job.CodeSnapshotFailed, err, "workspace snapshot failed")
}

// copyFiles copies the regular files of entries, filling sums, and
// returns the bytes copied. Each is opened beneath root without following
// a symlink at any level and must be the file the walk listed (device and
// inode, safecopy.ErrChanged otherwise); it is opened with O_NONBLOCK and
// checked with fstat, so a FIFO swapped in never blocks; its copy gets the
// permission bits both the walk and the open saw, so it is never written
// more readable than it was listed; a failed copy leaves nothing behind.
func copyFiles(ctx context.Context, root *safecopy.Root, dst string, entries []Entry, sums []string, limit int64) (int64, error) {
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
		work     = make(chan int)
		total    atomic.Int64
	)
	for w := 0; w < copyWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				e := entries[i]
				c, err := root.CopyListed(ctx, e.Rel, filepath.Join(dst, filepath.FromSlash(e.Rel)), e.seen(), limit)
				if err != nil {
					once.Do(func() { firstErr = err })
					continue
				}
				sums[i] = c.SHA256
				total.Add(c.Size)
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
		return 0, firstErr
	}
	return total.Load(), ctx.Err()
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
