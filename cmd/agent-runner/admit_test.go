package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// TestAdmitWorkspace: a pulled job's workspace is held to the worker's
// roots: a forged message (anyone holding the NATS token can publish one)
// cannot name a workspace outside them.
func TestAdmitWorkspace(t *testing.T) {
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
	for _, tt := range []struct {
		name, ws string
		want     job.Code
	}{
		{"under the root", ws, ""},
		{"outside the root", outside, job.CodePathEscape},
		{"escaping with ..", ws + "/../../..", job.CodePathEscape},
	} {
		err := admit(queue.Message{Request: job.Request{Workspace: job.Workspace{Path: tt.ws}}})
		if got := job.CodeOf(err); (err == nil) != (tt.want == "") || (err != nil && got != tt.want) {
			t.Errorf("%s: admit = %v, want code %q", tt.name, err, tt.want)
		}
	}
}
