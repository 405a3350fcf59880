package safecopy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// NoLimit, as a cap, lets a copy take any number of bytes.
const NoLimit int64 = -1

// Copy writes the regular file rel to w, refusing it (ErrTooLarge) when
// it holds more than limit bytes (NoLimit: unbounded). The cap is checked
// against the file's size first and then counted on the bytes actually
// read, so a file that grows is cut off: at most limit bytes reach w.
func (r *Root) Copy(ctx context.Context, rel string, w io.Writer, limit int64) (int64, error) {
	f, info, err := r.Open(rel)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if limit >= 0 && info.Size > limit {
		return 0, fmt.Errorf("%s: %d bytes, cap %d: %w", rel, info.Size, limit, ErrTooLarge)
	}
	n, err := copyCapped(ctx, w, f, limit)
	return n, grewPast(rel, limit, err)
}

// Copied is what CopyFile wrote.
type Copied struct {
	Size   int64
	SHA256 string
}

// CopyFile copies the regular file rel to the host path dst with mode
// perm (before umask) under Copy's rules and returns its size and
// SHA-256. Whatever was at dst is removed first, never written through;
// on any error nothing is left at dst.
func (r *Root) CopyFile(ctx context.Context, rel, dst string, perm fs.FileMode, limit int64) (Copied, error) {
	f, info, err := r.Open(rel)
	if err != nil {
		return Copied{}, err
	}
	defer f.Close()
	return writeFile(ctx, f, info, rel, dst, perm, limit)
}

// writeFile copies the open file f (rel, described by info) to dst for
// CopyFile and CopyListed.
func writeFile(ctx context.Context, f *os.File, info Info, rel, dst string, perm fs.FileMode, limit int64) (Copied, error) {
	if limit >= 0 && info.Size > limit {
		return Copied{}, fmt.Errorf("%s: %d bytes, cap %d: %w", rel, info.Size, limit, ErrTooLarge)
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Copied{}, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, perm)
	if err != nil {
		return Copied{}, err
	}
	h := sha256.New()
	n, err := copyCapped(ctx, io.MultiWriter(out, h), f, limit)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return Copied{}, grewPast(rel, limit, err)
	}
	return Copied{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// grewPast says which file passed its cap while it was read.
func grewPast(rel string, limit int64, err error) error {
	if errors.Is(err, ErrTooLarge) {
		return fmt.Errorf("%s: grew past its cap of %d bytes while it was read: %w", rel, limit, err)
	}
	return err
}

// copyCapped copies at most limit bytes of src to w (NoLimit: all of
// them) and reports ErrTooLarge when src has even one more. ctx is
// checked before every read.
func copyCapped(ctx context.Context, w io.Writer, src io.Reader, limit int64) (int64, error) {
	in := ctxReader{ctx: ctx, r: src}
	if limit < 0 {
		return io.Copy(w, in)
	}
	n, err := io.Copy(w, io.LimitReader(in, limit))
	if err != nil {
		return n, err
	}
	var one [1]byte
	for {
		m, err := in.Read(one[:])
		if m > 0 {
			return n, ErrTooLarge
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// ctxReader fails a read once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Budget bounds a whole-tree copy: the bytes and files taken so far
// against MaxBytes and MaxFiles (zero: unbounded). It is not safe for
// concurrent use.
type Budget struct {
	MaxBytes int64
	MaxFiles int

	bytes int64
	files int
}

// Limit returns the cap for the next file: the smaller of fileCap
// (NoLimit: none) and what is left of MaxBytes. It returns ErrBudget once
// MaxFiles files were taken.
func (b *Budget) Limit(fileCap int64) (int64, error) {
	if b.MaxFiles > 0 && b.files >= b.MaxFiles {
		return 0, fmt.Errorf("%d files: %w", b.MaxFiles, ErrBudget)
	}
	limit := fileCap
	if b.MaxBytes > 0 {
		left := max(b.MaxBytes-b.bytes, 0)
		if limit < 0 || left < limit {
			limit = left
		}
	}
	return limit, nil
}

// Take counts one copied file of n bytes.
func (b *Budget) Take(n int64) {
	b.bytes += n
	b.files++
}

// Used returns the bytes and files taken so far.
func (b *Budget) Used() (int64, int) { return b.bytes, b.files }
