package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
)

// TestSandboxFlagsBuildTheBackends: --sandbox-ro and --sandbox-path
// reach the linux_sandbox instance of the Set the door builds (its own
// view, no package global), and the enabled subset the runner gets holds
// that same instance.
func TestSandboxFlagsBuildTheBackends(t *testing.T) {
	tools := t.TempDir()
	os.Chmod(tools, 0o755)
	bin := filepath.Join(tools, "bin")
	f := sandboxFlags{readOnly: []string{tools}, path: bin + ":/usr/bin"}
	set, err := f.backends(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	sbx, ok := set[isolatingDefault].(backend.Viewer)
	if !ok {
		t.Fatalf("set[%s] = %T, want a backend with a view", isolatingDefault, set[isolatingDefault])
	}
	v := sbx.View()
	if !v.Visible(tools) || strings.Join(v.Path, ":") != bin+":/usr/bin" {
		t.Errorf("View() = roots %v path %v, want %s visible and PATH %s:/usr/bin", v.Roots, v.Path, tools, bin)
	}
	if got := enabledBackends(set, false)[isolatingDefault]; got != set[isolatingDefault] {
		t.Errorf("enabledBackends holds %p, want the Set's instance %p", got, set[isolatingDefault])
	}
	plain := sandboxFlags{path: "/usr/bin"}
	other, err := plain.backends(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	if other[isolatingDefault].(backend.Viewer).View().Visible(tools) {
		t.Errorf("a second Set without --sandbox-ro sees %s: the view is shared", tools)
	}

	store := filepath.Join(tools, "store")
	if _, err := f.backends(store); err == nil || !strings.Contains(err.Error(), "lies inside it") {
		t.Errorf("backends(store under --sandbox-ro) = %v, want the store refused", err)
	}
	missing := sandboxFlags{readOnly: []string{filepath.Join(tools, "missing")}}
	var u usageError
	if _, err := missing.backends(filepath.Join(t.TempDir(), "store")); err == nil || !errors.As(err, &u) {
		t.Errorf("backends(--sandbox-ro missing) = %v, want a usage error", err)
	}
}
