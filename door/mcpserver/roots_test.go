package mcpserver_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/door/mcpserver"
	"github.com/agent-runner/agent-runner/job"
)

// TestRunStoreIsRefusedUnderARoot: the run store (other jobs' snapshots
// and records) lies under the approved root here, and is still refused, as
// are a workspace holding it and a path climbing with "..".
func TestRunStoreIsRefusedUnderARoot(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store")
	for _, d := range []string{filepath.Join(store, "runs", "job_1", "snapshot"), filepath.Join(root, "repo")} {
		os.MkdirAll(d, 0o755)
	}
	cfg := mcpserver.Config{WorkspaceRoots: []string{root}, Excluded: []string{store}}
	tests := []struct {
		path string
		code job.Code
	}{
		{filepath.Join(root, "repo"), ""},
		{filepath.Join(store, "runs", "job_1", "snapshot"), job.CodePathEscape},
		{root, job.CodePathEscape},
		{filepath.Join(root, "repo") + "/../repo", job.CodePathEscape},
		{"/etc", job.CodePathEscape},
	}
	for _, tt := range tests {
		_, err := mcpserver.Request(cfg, mcpserver.RunArgs{WorkspacePath: tt.path, Argv: []string{"true"}})
		if got := job.CodeOf(err); got != tt.code {
			t.Errorf("Request(workspace_path %q) code = %q, want %q (%v)", tt.path, got, tt.code, err)
		}
	}
}
