package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/safepath"
)

// ReadFile copies the regular file rel of sandbox id's workspace to w:
// running or paused (a read needs no process of it). rel is relative to
// the workspace; one that leaves it, or a symlink on the way, is
// validation.path_escape; a file over MaxFileBytes is
// validation.limit_exceeded.
func (s *Service) ReadFile(ctx context.Context, id, rel string, w io.Writer) error {
	clean, err := workspacePath(rel)
	if err != nil {
		return err
	}
	h, err := s.running(id, StateRunning, StatePaused)
	if err != nil {
		return err
	}
	sb := h.sb
	h.mu.Unlock()
	var buf bytes.Buffer
	if err := sb.ReadFile(ctx, clean, &buf, s.cfg.MaxFileBytes); err != nil {
		return fileError(err, rel, s.cfg.MaxFileBytes)
	}
	_, err = buf.WriteTo(w)
	return err
}

// WriteFile creates or replaces the regular file rel of running sandbox
// id's workspace with data and mode's permission bits, atomically (a
// new file renamed over rel), creating its missing parent directories
// (owned as the workspace is); no symlink on the way is followed. A
// paused or ended sandbox is session.not_running; data over
// MaxFileBytes validation.body_too_large. Its audit line holds the
// path, the size, the sha256 of data and the mode.
func (s *Service) WriteFile(ctx context.Context, id, rel string, data []byte, mode fs.FileMode) error {
	c := &call{tool: AuditWriteFile, args: map[string]any{
		"path": rel, "bytes": len(data), "sha256": sha256Hex(data), "mode": fmt.Sprintf("%04o", mode.Perm()),
	}}
	return s.audited(id, c, func() error { return s.writeFile(ctx, id, rel, data, mode) })
}

func (s *Service) writeFile(ctx context.Context, id, rel string, data []byte, mode fs.FileMode) error {
	clean, err := workspacePath(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return job.Errorf(job.CodePathEscape, "the workspace root is not a file").With("path", rel)
	}
	if int64(len(data)) > s.cfg.MaxFileBytes {
		return job.Errorf(job.CodeBodyTooLarge, "a file may hold at most %d bytes", s.cfg.MaxFileBytes).With("max", s.cfg.MaxFileBytes)
	}
	h, err := s.running(id, StateRunning)
	if err != nil {
		return err
	}
	defer h.mu.Unlock()
	if dir := path.Dir(clean); dir != "." {
		files, err := treeOf(h)
		if err != nil {
			return err
		}
		if err := files.MakeDirs(ctx, dir); err != nil {
			return fileError(err, rel, s.cfg.MaxFileBytes)
		}
	}
	return fileError(h.sb.WriteFile(ctx, clean, bytes.NewReader(data), mode.Perm()), rel, s.cfg.MaxFileBytes)
}

// workspacePath is rel cleaned, or validation.path_escape (an empty
// one validation.invalid_request).
func workspacePath(rel string) (string, error) {
	if rel == "" {
		return "", job.Errorf(job.CodeInvalidRequest, "a file call needs its path").With("field", "path")
	}
	clean, err := safepath.Clean(strings.TrimPrefix(rel, "./"))
	if err != nil {
		return "", job.Wrap(job.CodePathEscape, err, "the path must stay inside the sandbox's workspace").With("path", rel)
	}
	return clean, nil
}

// fileError codes a file call's error: a job error as it is, a symlink
// or a path leaving the workspace validation.path_escape, a file that
// is not there job.not_found, a file over the cap
// validation.limit_exceeded, one that is not regular (a FIFO, a device)
// validation.invalid_request, anything else run.io_failed.
func fileError(err error, rel string, limit int64) error {
	var jerr *job.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, safecopy.ErrTooLarge):
		return job.Errorf(job.CodeLimitExceeded, "the file is larger than %d bytes", limit).With("path", rel).With("max", limit)
	case errors.Is(err, fs.ErrNotExist):
		return job.Errorf(job.CodeJobNotFound, "no file %s in the sandbox", rel).With("path", rel)
	case errors.Is(err, safecopy.ErrNotRegular):
		return job.Wrap(job.CodeInvalidRequest, err, "not a regular file").With("path", rel)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return job.Wrap(job.CodePathEscape, err, "the path leaves the sandbox's workspace or goes through a symlink").With("path", rel)
	case errors.As(err, &jerr):
		return err
	}
	return job.Wrap(job.CodeRunIOFailed, err, "cannot reach the file in the sandbox").With("path", rel)
}

// MaxFileBytes is the most one file read or write may carry.
func (s *Service) MaxFileBytes() int64 { return s.cfg.MaxFileBytes }
