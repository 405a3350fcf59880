package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// FileEntry is one entry of a sandbox's workspace, described as lstat
// describes it: a symlink is a symlink (its target in SymlinkTarget,
// from StatFile only), never followed.
type FileEntry struct {
	Name string `json:"name"`
	// Path is relative to the workspace root.
	Path string `json:"path"`
	// Type is file, dir, symlink or other (a FIFO, socket or device).
	Type backend.FileType `json:"type"`
	Size int64            `json:"size"`
	// Mode is the permission bits, with the set-id and sticky bits, in
	// four octal digits ("0644").
	Mode          string    `json:"mode"`
	ModifiedAt    time.Time `json:"modified_at"`
	SymlinkTarget string    `json:"symlink_target,omitempty"`
}

// Listing is a directory of a sandbox's workspace: its entries sorted by
// name, at most backend.DefaultMaxDirEntries (Truncated says there were
// more).
type Listing struct {
	Path      string      `json:"path"`
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// StatFile describes rel of sandbox id's workspace ("" or "." the root),
// running or paused.
func (s *Service) StatFile(ctx context.Context, id, rel string) (FileEntry, error) {
	clean, err := treePath(rel)
	if err != nil {
		return FileEntry{}, err
	}
	files, err := s.readableFiles(id)
	if err != nil {
		return FileEntry{}, err
	}
	fi, err := files.Stat(ctx, clean)
	if err != nil {
		return FileEntry{}, treeError(err, rel)
	}
	return fileEntry(fi), nil
}

// ListFiles lists the directory rel of sandbox id's workspace ("" or
// "." the root), running or paused. A symlink there is
// validation.path_escape, a file that is not a directory
// validation.invalid_request.
func (s *Service) ListFiles(ctx context.Context, id, rel string) (Listing, error) {
	clean, err := treePath(rel)
	if err != nil {
		return Listing{}, err
	}
	files, err := s.readableFiles(id)
	if err != nil {
		return Listing{}, err
	}
	infos, truncated, err := files.ReadDir(ctx, clean, backend.DefaultMaxDirEntries)
	if err != nil {
		return Listing{}, treeError(err, rel)
	}
	out := Listing{Path: clean, Entries: make([]FileEntry, len(infos)), Truncated: truncated}
	for i, fi := range infos {
		out.Entries[i] = fileEntry(fi)
	}
	return out, nil
}

// ReadFileRange copies the bytes r selects of the regular file rel of
// sandbox id's workspace to w, running or paused, and says which they
// were. At most MaxFileBytes may be selected (validation.limit_exceeded),
// of a file of any size; a range that selects none is
// validation.range_not_satisfiable, its span carrying the file's size.
func (s *Service) ReadFileRange(ctx context.Context, id, rel string, r backend.ByteRange, w io.Writer) (backend.FileSpan, error) {
	clean, err := workspacePath(rel)
	if err != nil {
		return backend.FileSpan{}, err
	}
	files, err := s.readableFiles(id)
	if err != nil {
		return backend.FileSpan{}, err
	}
	var buf bytes.Buffer
	span, err := files.ReadFileRange(ctx, clean, &buf, r, s.cfg.MaxFileBytes)
	if err != nil {
		return span, treeError(err, rel)
	}
	_, err = buf.WriteTo(w)
	return span, err
}

// RemoveFile removes rel of running sandbox id's workspace: a file, a
// symlink (the link) or an empty directory; a directory with entries
// only with recursive (else session.directory_not_empty), its tree
// removed without following a symlink. The root cannot be removed
// (validation.invalid_request). Paused or ended: session.not_running.
func (s *Service) RemoveFile(ctx context.Context, id, rel string, recursive bool) error {
	c := &call{tool: AuditRemoveFile, args: map[string]any{"path": rel, "recursive": recursive}}
	return s.audited(id, c, func() error { return s.removeFile(ctx, id, rel, recursive) })
}

func (s *Service) removeFile(ctx context.Context, id, rel string, recursive bool) error {
	clean, err := workspacePath(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return job.Errorf(job.CodeInvalidRequest, "the workspace root cannot be removed").With("path", rel)
	}
	h, files, err := s.writableFiles(id)
	if err != nil {
		return err
	}
	defer h.mu.Unlock()
	return treeError(files.Remove(ctx, clean, recursive), rel)
}

// MoveFile renames from to to in running sandbox id's workspace,
// creating to's missing parents; a file, symlink or empty directory at
// to is replaced, a directory with entries is not
// (session.directory_not_empty). Paused or ended: session.not_running.
func (s *Service) MoveFile(ctx context.Context, id, from, to string) error {
	c := &call{tool: AuditMoveFile, args: map[string]any{"from": from, "to": to}}
	return s.audited(id, c, func() error { return s.moveFile(ctx, id, from, to) })
}

func (s *Service) moveFile(ctx context.Context, id, from, to string) error {
	src, err := workspacePath(from)
	if err != nil {
		return err
	}
	dst, err := workspacePath(to)
	if err != nil {
		return err
	}
	if src == "." || dst == "." {
		return job.Errorf(job.CodeInvalidRequest, "the workspace root cannot be moved or replaced").With("from", from).With("to", to)
	}
	h, files, err := s.writableFiles(id)
	if err != nil {
		return err
	}
	defer h.mu.Unlock()
	return treeError(files.Rename(ctx, src, dst), from)
}

// readableFiles is the workspace tree of sandbox id, running or paused.
func (s *Service) readableFiles(id string) (backend.SandboxFiles, error) {
	h, err := s.running(id, StateRunning, StatePaused)
	if err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	return treeOf(h)
}

// writableFiles is the workspace tree of running sandbox id, with its
// handle locked (the caller unlocks it).
func (s *Service) writableFiles(id string) (*handle, backend.SandboxFiles, error) {
	h, err := s.running(id, StateRunning)
	if err != nil {
		return nil, nil, err
	}
	files, err := treeOf(h)
	if err != nil {
		h.mu.Unlock()
		return nil, nil, err
	}
	return h, files, nil
}

// treeOf is h's workspace tree, or backend.unavailable when its
// backend's sandboxes offer none.
func treeOf(h *handle) (backend.SandboxFiles, error) {
	if files := h.sb.Files(); files != nil {
		return files, nil
	}
	return nil, job.Errorf(job.CodeBackendUnavail, "backend %s cannot list, stat, remove or move a sandbox's files", h.rec.Backend).With("backend", h.rec.Backend)
}

// treePath is rel cleaned, the root for "" or ".".
func treePath(rel string) (string, error) {
	if rel == "" {
		return ".", nil
	}
	return workspacePath(rel)
}

// treeError is fileError for the tree calls, whose backend errors carry
// their codes already.
func treeError(err error, rel string) error {
	var jerr *job.Error
	if errors.As(err, &jerr) {
		return err
	}
	return fileError(err, rel, 0)
}

func fileEntry(fi backend.FileInfo) FileEntry {
	mode := uint32(fi.Mode.Perm())
	if fi.Mode&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if fi.Mode&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if fi.Mode&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return FileEntry{
		Name: fi.Name, Path: fi.Path, Type: fi.Type, Size: fi.Size,
		Mode: fmt.Sprintf("%04o", mode), ModifiedAt: fi.ModTime.UTC(), SymlinkTarget: fi.SymlinkTarget,
	}
}
