package anthropicmock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeInstall lays out an npm prefix holding a Claude Code package whose
// claude bin is bin, with files (name -> size, executable) in the package.
func fakeInstall(t *testing.T, bin string, files map[string]int) (prefix, pkg string) {
	t.Helper()
	prefix = t.TempDir()
	pkg = filepath.Join(prefix, "node_modules", "@anthropic-ai", "claude-code")
	if err := os.MkdirAll(filepath.Join(pkg, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"name":"@anthropic-ai/claude-code","bin":{"claude":"` + bin + `"}}`
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, size := range files {
		if err := os.WriteFile(filepath.Join(pkg, name), make([]byte, size), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return prefix, pkg
}

func TestResolveCLI(t *testing.T) {
	tests := []struct {
		name  string
		bin   string
		files map[string]int
		want  func(pkg string) []string // nil: an error
	}{
		{"cli.js release", "cli.js", map[string]int{"cli.js": 10},
			func(pkg string) []string { return []string{"node", filepath.Join(pkg, "cli.js")} }},
		{"native release", "bin/claude.exe", map[string]int{"bin/claude.exe": stubSize, "cli-wrapper.cjs": 10},
			func(pkg string) []string { return []string{filepath.Join(pkg, "bin/claude.exe")} }},
		{"placeholder left by a skipped postinstall", "bin/claude.exe", map[string]int{"bin/claude.exe": 500, "cli-wrapper.cjs": 10},
			func(pkg string) []string { return []string{"node", filepath.Join(pkg, "cli-wrapper.cjs")} }},
		{"placeholder and no wrapper", "bin/claude.exe", map[string]int{"bin/claude.exe": 500}, nil},
		{"cli.js missing", "cli.js", nil, nil},
		{"no claude bin", "", nil, nil},
	}
	for _, tt := range tests {
		prefix, pkg := fakeInstall(t, tt.bin, tt.files)
		got, err := resolveCLI(prefix)
		if tt.want == nil {
			if err == nil {
				t.Errorf("%s: resolveCLI = %q, want an error", tt.name, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: resolveCLI: %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want(pkg), got); diff != "" {
			t.Errorf("%s: resolveCLI (-want +got):\n%s", tt.name, diff)
		}
	}
	if _, err := resolveCLI(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("resolveCLI(empty dir) = %v, want a not installed error", err)
	}
}

func TestCacheDir(t *testing.T) {
	t.Setenv("AGENT_RUNNER_TEST_CACHE", "/cache/here")
	got, err := CacheDir("2.1.330")
	if want := "/cache/here/claude-code-2.1.330"; got != want || err != nil {
		t.Errorf("CacheDir(%q) = %q, %v; want %q", "2.1.330", got, err, want)
	}

	t.Setenv("AGENT_RUNNER_TEST_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	got, err = CacheDir("2.1.330")
	if want := "/xdg/agent-runner-test/claude-code-2.1.330"; got != want || err != nil {
		t.Errorf("CacheDir(%q) without AGENT_RUNNER_TEST_CACHE = %q, %v; want %q", "2.1.330", got, err, want)
	}
}

func TestCLIUsesACompleteInstallWithoutNPM(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("AGENT_RUNNER_TEST_CACHE", cache)
	t.Setenv("PATH", t.TempDir()) // no npm: an install attempt would fail
	_, pkg := fakeInstall(t, "cli.js", map[string]int{"cli.js": 10})
	if err := os.Rename(filepath.Dir(filepath.Dir(filepath.Dir(pkg))), filepath.Join(cache, "claude-code-9.9.9")); err != nil {
		t.Fatal(err)
	}
	got, err := CLI(t.Context(), "9.9.9")
	if want := []string{"node", filepath.Join(cache, "claude-code-9.9.9/node_modules/@anthropic-ai/claude-code/cli.js")}; err != nil || !cmp.Equal(got, want) {
		t.Errorf("CLI(9.9.9) = %q, %v; want %q", got, err, want)
	}
	if _, err := CLI(t.Context(), "9.9.8"); err == nil || !strings.Contains(err.Error(), "npm install") {
		t.Errorf("CLI(9.9.8) with no install and no npm = %v, want the npm install error", err)
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "*.tmp-*")); len(left) != 0 {
		t.Errorf("a failed install left %q behind", left)
	}
}

func TestCLIInstallsOverABrokenInstall(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("AGENT_RUNNER_TEST_CACHE", cache)
	broken := filepath.Join(cache, "claude-code-9.9.9")
	if err := os.MkdirAll(filepath.Join(broken, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A fake npm: `npm install --prefix DIR SPEC ...` lays out a cli.js release in DIR.
	bin := t.TempDir()
	npm := `#!/bin/sh
[ "$1 $2" = "install --prefix" ] && [ "$4" = "@anthropic-ai/claude-code@9.9.9" ] || exit 2
pkg="$3/node_modules/@anthropic-ai/claude-code"
mkdir -p "$pkg" && echo '{"bin":{"claude":"cli.js"}}' > "$pkg/package.json" && echo x > "$pkg/cli.js"
`
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(npm), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/bin:/bin")

	got, err := CLI(t.Context(), "9.9.9")
	want := []string{"node", filepath.Join(broken, "node_modules/@anthropic-ai/claude-code/cli.js")}
	if err != nil || !cmp.Equal(got, want) {
		t.Fatalf("CLI(9.9.9) over a broken install = %q, %v; want %q", got, err, want)
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"claude-code-9.9.9"}, names); diff != "" {
		t.Errorf("cache entries (-want +got), no temporary or broken install left:\n%s", diff)
	}
}
