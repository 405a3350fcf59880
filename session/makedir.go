package session

import (
	"context"

	"github.com/agent-runner/agent-runner/job"
)

// MakeDir creates directory rel of running sandbox id's workspace and
// its missing parents (backend.SandboxFiles.MakeDirs: owned as the
// workspace is, no symlink followed on the way), as the E2B-compatible
// door's files.makeDir asks: created is
// false when rel already is a directory; another entry there is
// job.conflict. Paused or ended: session.not_running.
func (s *Service) MakeDir(ctx context.Context, id, rel string) (created bool, err error) {
	c := &call{tool: AuditMakeDir, args: map[string]any{"path": rel}}
	err = s.audited(id, c, func() error {
		created, err = s.makeDir(ctx, id, rel)
		if err == nil {
			c.result = map[string]any{"created": created}
		}
		return err
	})
	return created, err
}

func (s *Service) makeDir(ctx context.Context, id, rel string) (created bool, err error) {
	clean, err := workspacePath(rel)
	if err != nil {
		return false, err
	}
	if e, err := s.StatFile(ctx, id, clean); err == nil {
		if e.Type != "dir" {
			return false, job.Errorf(job.CodeJobConflict, "%s exists and is not a directory", rel).With("path", rel)
		}
		return false, nil
	}
	h, files, err := s.writableFiles(id)
	if err != nil {
		return false, err
	}
	defer h.mu.Unlock()
	if err := files.MakeDirs(ctx, clean); err != nil {
		return false, fileError(err, rel, s.cfg.MaxFileBytes)
	}
	return true, nil
}
