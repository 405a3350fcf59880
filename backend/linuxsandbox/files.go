package linuxsandbox

import (
	"context"
	"io"

	"github.com/agent-runner/agent-runner/backend"
)

// A kept sandbox's workspace tree is the host's through its init's
// root (Sandbox.workspace), so an overlay or a disk-limited workspace is
// listed, pruned and rearranged as the sandbox sees it, by
// backend.WorkspaceDir's no-follow, fd-relative rules. What they create
// is owned as the workspace root is: the sandbox's mapped workload user
// under a root runner.
var _ backend.SandboxFiles = (*Sandbox)(nil)

// Stat implements backend.SandboxFiles.
func (s *Sandbox) Stat(ctx context.Context, rel string) (backend.FileInfo, error) {
	if err := s.begin(); err != nil {
		return backend.FileInfo{}, err
	}
	defer s.ops.Done()
	return backend.WorkspaceDir(s.workspace()).Stat(ctx, rel)
}

// ReadDir implements backend.SandboxFiles.
func (s *Sandbox) ReadDir(ctx context.Context, rel string, max int) ([]backend.FileInfo, bool, error) {
	if err := s.begin(); err != nil {
		return nil, false, err
	}
	defer s.ops.Done()
	return backend.WorkspaceDir(s.workspace()).ReadDir(ctx, rel, max)
}

// ReadFileRange implements backend.SandboxFiles.
func (s *Sandbox) ReadFileRange(ctx context.Context, rel string, w io.Writer, r backend.ByteRange, limit int64) (backend.FileSpan, error) {
	if err := s.begin(); err != nil {
		return backend.FileSpan{}, err
	}
	defer s.ops.Done()
	return backend.WorkspaceDir(s.workspace()).ReadFileRange(ctx, rel, w, r, limit)
}

// Remove implements backend.SandboxFiles.
func (s *Sandbox) Remove(ctx context.Context, rel string, recursive bool) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.ops.Done()
	return backend.WorkspaceDir(s.workspace()).Remove(ctx, rel, recursive)
}

// Rename implements backend.SandboxFiles.
func (s *Sandbox) Rename(ctx context.Context, from, to string) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.ops.Done()
	return backend.WorkspaceDir(s.workspace()).Rename(ctx, from, to)
}

// MakeDirs implements backend.SandboxFiles.
func (s *Sandbox) MakeDirs(ctx context.Context, rel string) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.ops.Done()
	return backend.WorkspaceDir(s.workspace()).MakeDirs(ctx, rel)
}
