package agentstep_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/manifest"
)

// viewed is a backend whose sandbox sees only view.
type viewed struct{ view backend.View }

func (v viewed) Kind() string                       { return "viewed" }
func (v viewed) Capabilities() backend.Capabilities { return backend.Capabilities{Isolating: true} }
func (v viewed) Available(context.Context) error    { return nil }
func (v viewed) View() backend.View                 { return v.view }
func (v viewed) Run(context.Context, backend.Spec) (backend.Outcome, error) {
	return backend.Outcome{}, nil
}

// TestResolveInsideTheView: on a backend with a view, an agent command
// resolves on the sandbox's PATH inside the view, even when serve's own
// PATH has a shim directory first, and one found only outside the view is
// refused naming the flag that would let it in.
func TestResolveInsideTheView(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inside := mk("usr/bin/python3")
	mk("home/.pyenv/shims/python3")
	mk("home/.local/bin/claude")
	shims, local := filepath.Join(dir, "home/.pyenv/shims"), filepath.Join(dir, "home/.local/bin")
	t.Setenv("PATH", shims+":"+local+":/usr/bin:/bin")
	b := viewed{backend.View{Roots: []string{filepath.Join(dir, "usr")}, Path: []string{filepath.Join(dir, "usr/bin")}}}
	tests := []struct {
		name, command, want, message string
	}{
		{"a shim first on serve's PATH is not used", "python3", inside, ""},
		{"absolute inside", inside, inside, ""},
		{"a workspace program", "./agent.sh", "./agent.sh", ""},
		{"bare name outside the view", "claude", "", `agent command "claude": ` + filepath.Join(local, "claude") + " is outside the sandbox view (" + filepath.Join(dir, "usr") + "); add --sandbox-ro " + filepath.Join(dir, "home/.local") + " and put " + local + " on --sandbox-path, flags of serve"},
		{"absolute outside", filepath.Join(local, "claude"), "", "add --sandbox-ro " + filepath.Join(dir, "home/.local") + ", flags of serve"},
		{"nowhere", "no-such-agent-xyz", "", "not found on the sandbox PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := &manifest.Task{Agent: &manifest.Agent{Command: []string{tt.command}}}
			err := agentstep.Check(b, tk)
			if tt.want != "" {
				if err != nil {
					t.Fatalf("Check(%q) = %v, want nil", tt.command, err)
				}
				got, err := agentstep.Resolve(b, tt.command)
				if err != nil || got != tt.want {
					t.Errorf("Resolve(%q) = %q, %v, want %q", tt.command, got, err, tt.want)
				}
				return
			}
			if job.CodeOf(err) != job.CodeInvalidRequest || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("Check(%q) = %v, want %s containing %q", tt.command, err, job.CodeInvalidRequest, tt.message)
			}
		})
	}
	// Without a view (local_process) the host's PATH is the one the agent runs with.
	if err := agentstep.Check(plain{}, &manifest.Task{Agent: &manifest.Agent{Command: []string{"no-such-agent-xyz"}}}); err != nil {
		t.Errorf("Check without a view = %v, want nil (looked up when the agent starts)", err)
	}
	if got, err := agentstep.Resolve(plain{}, "python3"); err != nil || got != filepath.Join(shims, "python3") {
		t.Errorf("Resolve without a view = %q, %v, want the host's %s", got, err, filepath.Join(shims, "python3"))
	}
}

// plain is a backend without a view.
type plain struct{}

func (plain) Kind() string                       { return "plain" }
func (plain) Capabilities() backend.Capabilities { return backend.Capabilities{} }
func (plain) Available(context.Context) error    { return nil }
func (plain) Run(context.Context, backend.Spec) (backend.Outcome, error) {
	return backend.Outcome{}, nil
}
