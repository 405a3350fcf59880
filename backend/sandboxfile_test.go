package backend_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// TestWorkspaceFiles: writes land only beneath the workspace, replace a
// symlink instead of following it, and reads refuse what safecopy refuses.
func TestWorkspaceFiles(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	outside := t.TempDir()
	os.Mkdir(filepath.Join(ws, "dir"), 0o755)
	os.Symlink(outside, filepath.Join(ws, "linkdir"))
	os.Symlink(filepath.Join(outside, "target"), filepath.Join(ws, "link"))
	tests := []struct {
		rel      string
		wantCode job.Code // "" for success
	}{
		{"new.txt", ""},
		{"dir/new.txt", ""},
		{"link", ""}, // the link is replaced
		{"linkdir/x", job.CodePathEscape},
		{"../x", job.CodePathEscape},
		{"/etc/x", job.CodePathEscape},
		{".", job.CodePathEscape},
		{"missing/x", job.CodeRunIOFailed},
	}
	for _, tt := range tests {
		err := backend.WriteWorkspaceFile(ctx, ws, tt.rel, strings.NewReader("data"), 0o640)
		if got := job.CodeOf(err); got != tt.wantCode {
			t.Errorf("WriteWorkspaceFile(%q) = %v, want code %q", tt.rel, err, tt.wantCode)
			continue
		}
		if tt.wantCode != "" {
			continue
		}
		var b strings.Builder
		if err := backend.ReadWorkspaceFile(ctx, ws, tt.rel, &b, 100); err != nil || b.String() != "data" {
			t.Errorf("ReadWorkspaceFile(%q) = %q, %v; want %q", tt.rel, b.String(), err, "data")
		}
		fi, err := os.Lstat(filepath.Join(ws, tt.rel))
		if err != nil || fi.Mode() != 0o640 {
			t.Errorf("Lstat(%q) mode = %v, %v; want a regular file 0640", tt.rel, fi.Mode(), err)
		}
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 0 {
		t.Errorf("files appeared outside the workspace: %v", entries)
	}
	var b strings.Builder
	os.Symlink("/etc/passwd", filepath.Join(ws, "passwd"))
	if err := backend.ReadWorkspaceFile(ctx, ws, "passwd", &b, 1<<20); job.CodeOf(err) != job.CodePathEscape || b.Len() != 0 {
		t.Errorf("ReadWorkspaceFile(symlink to /etc/passwd) = %q, %v; want %s", b.String(), err, job.CodePathEscape)
	}
}
