package backend_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
)

func TestViewVisible(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"tools/bin", "tools/secret", "elsewhere"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	for _, f := range []string{"tools/bin/tool", "tools/secret/key", "elsewhere/prog"} {
		os.WriteFile(filepath.Join(dir, f), []byte("#!/bin/sh\n"), 0o755)
	}
	os.Symlink(filepath.Join(dir, "elsewhere/prog"), filepath.Join(dir, "tools/bin/out"))
	os.Symlink("tool", filepath.Join(dir, "tools/bin/in"))
	v := backend.View{Roots: []string{filepath.Join(dir, "tools")}, Masked: []string{filepath.Join(dir, "tools/secret")}, Path: []string{filepath.Join(dir, "tools/bin")}}
	tests := []struct {
		path string
		want bool
	}{
		{"tools/bin/tool", true},
		{"tools/bin/in", true},
		{"tools/bin/out", false},     // a link whose target lies outside
		{"tools/secret/key", false},  // masked
		{"elsewhere/prog", false},    // outside every root
		{"tools/bin/missing", false}, // nothing there
	}
	for _, tt := range tests {
		p := filepath.Join(dir, tt.path)
		if got := v.Visible(p); got != tt.want {
			t.Errorf("Visible(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
	if got := v.Visible("tools/bin/tool"); got {
		t.Errorf("Visible(relative) = true, want false")
	}
	if got, want := v.LookPath("out"), ""; got != want {
		t.Errorf("LookPath(out) = %q, want %q", got, want)
	}
	if got, want := v.LookPath("in"), filepath.Join(dir, "tools/bin/in"); got != want {
		t.Errorf("LookPath(in) = %q, want %q", got, want)
	}
}
