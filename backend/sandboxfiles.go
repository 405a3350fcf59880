package backend

import (
	"context"
	"io"
	"io/fs"
	"time"
)

// SandboxFiles is implemented by a Sandbox whose workspace tree can be
// described, listed, ranged over, pruned and rearranged beyond
// ReadFile and WriteFile. Every path is relative to the workspace root
// ("." is the root) and is resolved as ReadFile resolves it: from the
// root, never following a symlink at any level, so a path that leaves
// the workspace or goes through a symlink is validation.path_escape. A
// backend whose workspace the host reaches as a directory implements it
// with the Workspace* functions (workspacetree.go); another (a microVM
// whose disk the host cannot open) implements it over its own channel
// or not at all, and its callers say so.
type SandboxFiles interface {
	// Stat describes rel as lstat does: a symlink is described, never
	// followed, and its target is read (readlinkat).
	Stat(ctx context.Context, rel string) (FileInfo, error)
	// ReadDir lists the directory rel sorted by name, at most max
	// entries (max <= 0: DefaultMaxDirEntries); more is truncated true.
	// Entries are described as Stat does but for SymlinkTarget.
	ReadDir(ctx context.Context, rel string, max int) (entries []FileInfo, truncated bool, err error)
	// ReadFileRange copies the bytes r selects of the regular file rel
	// to w and returns which they were. A range the file cannot satisfy
	// is validation.range_not_satisfiable (the span still carries the
	// size); more than limit bytes selected (a negative limit: no cap)
	// is validation.limit_exceeded.
	ReadFileRange(ctx context.Context, rel string, w io.Writer, r ByteRange, limit int64) (FileSpan, error)
	// Remove removes rel: a file, a symlink (the link itself) or an
	// empty directory; a directory with entries only with recursive
	// (else session.directory_not_empty), whose entries are removed
	// beneath it without following a symlink or entering another file
	// system. The root is never removed.
	Remove(ctx context.Context, rel string, recursive bool) error
	// Rename moves from to to (renameat), creating to's missing parent
	// directories (owned as the root is). What is at to is replaced
	// unless it is a directory with entries (session.directory_not_empty).
	Rename(ctx context.Context, from, to string) error
	// MakeDirs creates the directory rel and its missing parents, owned
	// as the root is, without following a symlink at any level; one
	// already there is left as it is, anything else there is an error.
	MakeDirs(ctx context.Context, rel string) error
}

// DefaultMaxDirEntries is ReadDir's cap when its caller sets none.
const DefaultMaxDirEntries = 10000

// FileType is what kind of entry a FileInfo describes.
type FileType string

// The file types: a FIFO, socket or device is other.
const (
	FileRegular FileType = "file"
	FileDir     FileType = "dir"
	FileSymlink FileType = "symlink"
	FileOther   FileType = "other"
)

// FileInfo describes one entry of a workspace.
type FileInfo struct {
	// Name is the entry's base name ("." for the root); Path its path
	// from the root.
	Name, Path string
	Type       FileType
	Size       int64
	// Mode is the entry's mode as package fs says it (permission and
	// set-id bits with the type).
	Mode    fs.FileMode
	ModTime time.Time
	// SymlinkTarget is a symlink's target as it reads (Stat only).
	SymlinkTarget string
}

// ByteRange selects bytes of a file as one HTTP range does: Start to
// End (End exclusive; 0: to the end of the file), or, when Suffix is
// positive, the last Suffix bytes. The zero ByteRange is the whole file.
type ByteRange struct {
	Start, End, Suffix int64
}

// Resolve returns the offset and length r selects in a file of size
// bytes; ok is false when it selects none: a start at or past the end
// (of an empty file too, but for the whole of it or a suffix, which
// select its zero bytes), or an end before the start.
func (r ByteRange) Resolve(size int64) (off, n int64, ok bool) {
	if r.Suffix > 0 {
		return max(size-r.Suffix, 0), min(r.Suffix, size), true
	}
	if r == (ByteRange{}) {
		return 0, size, true
	}
	if r.Start < 0 || r.Start >= size || (r.End > 0 && r.End <= r.Start) {
		return 0, 0, false
	}
	end := size
	if r.End > 0 && r.End < size {
		end = r.End
	}
	return r.Start, end - r.Start, true
}

// FileSpan is what ReadFileRange read: Length bytes from Offset of a
// file of Size bytes.
type FileSpan struct {
	Offset, Length, Size int64
}
