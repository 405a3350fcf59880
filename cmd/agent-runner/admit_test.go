package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// TestAdmitWorkspaceChecksMounts: a pulled job's message is held to the
// worker's roots as a whole: a forged message (anyone holding the NATS
// token can publish one) cannot mount a host directory outside them, read
// or write, even with an admitted workspace.
func TestAdmitWorkspaceChecksMounts(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	roots, err := workspaceroot.New([]string{root}, filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	admit := admitWorkspace(roots)
	req := job.Request{Workspace: job.Workspace{Path: ws}}
	for _, tt := range []struct {
		name   string
		mounts *queue.Mounts
		want   job.Code
	}{
		{"no mounts", nil, ""},
		{"mounts under the root", &queue.Mounts{ReadOnly: []string{ws}, Writable: []string{ws}}, ""},
		{"read-only mount outside", &queue.Mounts{ReadOnly: []string{outside}}, job.CodePathEscape},
		{"writable mount outside", &queue.Mounts{Writable: []string{"/etc"}}, job.CodePathEscape},
		{"mount escaping with ..", &queue.Mounts{ReadOnly: []string{ws + "/../../.."}}, job.CodePathEscape},
	} {
		err := admit(queue.Message{Request: req, Mounts: tt.mounts})
		if got := job.CodeOf(err); (err == nil) != (tt.want == "") || (err != nil && got != tt.want) {
			t.Errorf("%s: admit = %v, want code %q", tt.name, err, tt.want)
		}
	}
}
