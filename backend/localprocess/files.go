package localprocess

import (
	"context"
	"io"

	"github.com/agent-runner/agent-runner/backend"
)

// A sandbox's workspace tree is its host directory, listed, pruned and
// rearranged by backend.WorkspaceDir's no-follow, fd-relative rules.
var _ backend.SandboxFiles = (*Sandbox)(nil)

// Stat implements backend.SandboxFiles.
func (s *Sandbox) Stat(ctx context.Context, rel string) (backend.FileInfo, error) {
	if err := s.live(); err != nil {
		return backend.FileInfo{}, err
	}
	return backend.WorkspaceDir(s.spec.Workspace.Dir).Stat(ctx, rel)
}

// ReadDir implements backend.SandboxFiles.
func (s *Sandbox) ReadDir(ctx context.Context, rel string, max int) ([]backend.FileInfo, bool, error) {
	if err := s.live(); err != nil {
		return nil, false, err
	}
	return backend.WorkspaceDir(s.spec.Workspace.Dir).ReadDir(ctx, rel, max)
}

// ReadFileRange implements backend.SandboxFiles.
func (s *Sandbox) ReadFileRange(ctx context.Context, rel string, w io.Writer, r backend.ByteRange, limit int64) (backend.FileSpan, error) {
	if err := s.live(); err != nil {
		return backend.FileSpan{}, err
	}
	return backend.WorkspaceDir(s.spec.Workspace.Dir).ReadFileRange(ctx, rel, w, r, limit)
}

// Remove implements backend.SandboxFiles.
func (s *Sandbox) Remove(ctx context.Context, rel string, recursive bool) error {
	if err := s.live(); err != nil {
		return err
	}
	return backend.WorkspaceDir(s.spec.Workspace.Dir).Remove(ctx, rel, recursive)
}

// Rename implements backend.SandboxFiles.
func (s *Sandbox) Rename(ctx context.Context, from, to string) error {
	if err := s.live(); err != nil {
		return err
	}
	return backend.WorkspaceDir(s.spec.Workspace.Dir).Rename(ctx, from, to)
}

// MakeDirs implements backend.SandboxFiles.
func (s *Sandbox) MakeDirs(ctx context.Context, rel string) error {
	if err := s.live(); err != nil {
		return err
	}
	return backend.WorkspaceDir(s.spec.Workspace.Dir).MakeDirs(ctx, rel)
}
