package taskstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/state"
)

func TestDestroy(t *testing.T) {
	root := t.TempDir()
	s, _ := New(root, lifecycle.Config{})
	now := time.Now()
	seed(t, root, "kept", state.FailedPreserved, now)
	seed(t, root, "busy", state.Running, now)
	for _, id := range []string{"kept", "busy"} {
		os.MkdirAll(filepath.Join(root, id, "inbox", "src"), 0o755)
		os.WriteFile(filepath.Join(root, id, "inbox", "src", "f"), []byte("x"), 0o644)
		os.MkdirAll(filepath.Join(root, id, "base.git"), 0o755)
	}
	if _, err := s.Workspace("kept"); err != nil {
		t.Fatalf("preserved workspace: %v", err)
	}
	for id, code := range map[string]job.Code{"busy": job.CodeNotTerminal, "ghost": job.CodeJobNotFound, "..": job.CodeJobNotFound, "a/b": job.CodeJobNotFound} {
		if err := s.Destroy(id); job.CodeOf(err) != code {
			t.Errorf("Destroy(%q) = %v, want %s", id, err, code)
		}
		if _, err := s.Workspace(id); job.CodeOf(err) != code {
			t.Errorf("Workspace(%q) = %v, want %s", id, err, code)
		}
	}
	if err := s.Destroy("kept"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"inbox", "base.git"} {
		if _, err := os.Stat(filepath.Join(root, "kept", p)); !os.IsNotExist(err) {
			t.Errorf("%s survived destroy", p)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "busy", "inbox", "src", "f")); err != nil {
		t.Error("destroying another task touched busy's workspace")
	}
	m, _ := state.Open(filepath.Join(root, "kept"))
	if m.Current().State != state.FailedPreserved {
		t.Errorf("state changed to %s", m.Current().State)
	}
	events, _ := os.ReadFile(filepath.Join(root, "kept", state.EventsFile))
	if strings.Count(string(events), "workspace_destroyed") != 1 {
		t.Errorf("events = %s", events)
	}
	// Twice is fine and records nothing more.
	if err := s.Destroy("kept"); err != nil {
		t.Errorf("second destroy = %v", err)
	}
	events, _ = os.ReadFile(filepath.Join(root, "kept", state.EventsFile))
	if strings.Count(string(events), "workspace_destroyed") != 1 {
		t.Errorf("second destroy was recorded: %s", events)
	}
	if _, err := s.Workspace("kept"); job.CodeOf(err) != job.CodeJobNotFound || !strings.Contains(err.Error(), "no workspace") {
		t.Errorf("Workspace after destroy = %v", err)
	}
}

// TestDestroyWaitsForNoShell: while a shell holds the workspace lock,
// destroy is refused with job.conflict and removes nothing.
func TestDestroyWaitsForNoShell(t *testing.T) {
	root := t.TempDir()
	s, _ := New(root, lifecycle.Config{})
	seed(t, root, "kept", state.FailedPreserved, time.Now())
	os.MkdirAll(filepath.Join(root, "kept", "inbox"), 0o755)
	release, err := s.LockWorkspace("kept")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Destroy("kept"); job.CodeOf(err) != job.CodeJobConflict {
		t.Errorf("Destroy during a shell = %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "kept", "inbox")); err != nil {
		t.Error("workspace removed under a shell")
	}
	release()
	if err := s.Destroy("kept"); err != nil {
		t.Errorf("Destroy after the shell = %v", err)
	}
}
