package hostcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	// The real overlay probe re-execs this test binary as its child.
	MaybeOverlayChild()
	os.Exit(m.Run())
}

// fakeRoot writes files (path -> content; a path ending in "/" is a
// directory) under a temp dir used as Host.Root.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// merge returns the union of file sets; later sets win.
func merge(sets ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, s := range sets {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}

// byName indexes checks by name.
func byName(t *testing.T, checks []Check) map[string]Check {
	t.Helper()
	out := map[string]Check{}
	for _, c := range checks {
		if _, dup := out[c.Name]; dup {
			t.Errorf("check %q appears twice", c.Name)
		}
		out[c.Name] = c
	}
	return out
}

// want is an expected check: its status and words its found and fix
// lines must hold.
type want struct {
	status Status
	found  string
	fix    string
}

func expect(t *testing.T, checks []Check, wants map[string]want) {
	t.Helper()
	got := byName(t, checks)
	for name, w := range wants {
		c, ok := got[name]
		if !ok {
			t.Errorf("no check %q; have %v", name, checks)
			continue
		}
		if c.Status != w.status {
			t.Errorf("%s: status = %q (%s), want %q", name, c.Status, c.Found, w.status)
		}
		if !strings.Contains(c.Found, w.found) {
			t.Errorf("%s: found = %q, want it to contain %q", name, c.Found, w.found)
		}
		if !strings.Contains(c.Fix, w.fix) {
			t.Errorf("%s: fix = %q, want it to contain %q", name, c.Fix, w.fix)
		}
		if c.Status != StatusOK && c.Status != StatusInfo && c.Fix == "" {
			t.Errorf("%s: status %q without a fix line", name, c.Status)
		}
	}
}

// listDir returns the names in dir, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
