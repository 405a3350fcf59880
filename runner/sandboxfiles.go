package runner

import (
	"context"
	"io"
	"io/fs"

	"github.com/agent-runner/agent-runner/backend"
)

// Pause freezes every process of the sandbox (backend.Sandbox.Pause): a
// backend that cannot freeze fails with backend.unavailable and leaves
// it running.
func (s *Sandbox) Pause(ctx context.Context) error { return s.sb.Pause(ctx) }

// Resume thaws a paused sandbox; on a running one it does nothing.
func (s *Sandbox) Resume(ctx context.Context) error { return s.sb.Resume(ctx) }

// ReadFile copies the regular file rel of the sandbox's workspace to w,
// refusing one over limit bytes (backend.Sandbox.ReadFile: no symlink is
// followed, nothing but a regular file is opened).
func (s *Sandbox) ReadFile(ctx context.Context, rel string, w io.Writer, limit int64) error {
	return s.sb.ReadFile(ctx, rel, w, limit)
}

// WriteFile creates or replaces the regular file rel of the sandbox's
// workspace with r's bytes and mode (backend.Sandbox.WriteFile: its
// parent must exist, no symlink on the way is followed).
func (s *Sandbox) WriteFile(ctx context.Context, rel string, r io.Reader, mode fs.FileMode) error {
	return s.sb.WriteFile(ctx, rel, r, mode)
}

// Workspace is the host directory the sandbox's processes work in
// (SandboxSpec.Workspace).
func (s *Sandbox) Workspace() string { return s.spec.Workspace }

// Files is the sandbox's workspace tree (backend.SandboxFiles: stat,
// listings, ranged reads, removal, moves), or nil when its backend's
// sandboxes offer none.
func (s *Sandbox) Files() backend.SandboxFiles {
	f, _ := s.sb.(backend.SandboxFiles)
	return f
}
