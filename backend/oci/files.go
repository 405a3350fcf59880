package oci

import (
	"context"
	"io"

	"github.com/agent-runner/agent-runner/backend"
)

// A sandbox's workspace is a host directory bound at /workspace, so its
// tree is listed, pruned and rearranged there by backend.WorkspaceDir's
// no-follow, fd-relative rules, as local_process's is.
var _ backend.SandboxFiles = (*Sandbox)(nil)

// tree is the workspace directory, once the sandbox is known live.
func (s *Sandbox) tree() (backend.WorkspaceDir, error) {
	return backend.WorkspaceDir(s.spec.Workspace.Dir), s.live()
}

// Stat implements backend.SandboxFiles.
func (s *Sandbox) Stat(ctx context.Context, rel string) (backend.FileInfo, error) {
	d, err := s.tree()
	if err != nil {
		return backend.FileInfo{}, err
	}
	return d.Stat(ctx, rel)
}

// ReadDir implements backend.SandboxFiles.
func (s *Sandbox) ReadDir(ctx context.Context, rel string, max int) ([]backend.FileInfo, bool, error) {
	d, err := s.tree()
	if err != nil {
		return nil, false, err
	}
	return d.ReadDir(ctx, rel, max)
}

// ReadFileRange implements backend.SandboxFiles.
func (s *Sandbox) ReadFileRange(ctx context.Context, rel string, w io.Writer, r backend.ByteRange, limit int64) (backend.FileSpan, error) {
	d, err := s.tree()
	if err != nil {
		return backend.FileSpan{}, err
	}
	return d.ReadFileRange(ctx, rel, w, r, limit)
}

// Remove implements backend.SandboxFiles.
func (s *Sandbox) Remove(ctx context.Context, rel string, recursive bool) error {
	d, err := s.tree()
	if err != nil {
		return err
	}
	return d.Remove(ctx, rel, recursive)
}

// Rename implements backend.SandboxFiles.
func (s *Sandbox) Rename(ctx context.Context, from, to string) error {
	d, err := s.tree()
	if err != nil {
		return err
	}
	return d.Rename(ctx, from, to)
}

// MakeDirs implements backend.SandboxFiles.
func (s *Sandbox) MakeDirs(ctx context.Context, rel string) error {
	d, err := s.tree()
	if err != nil {
		return err
	}
	return d.MakeDirs(ctx, rel)
}
