package validation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

// mountWorkspace is a workspace with dependency directories, a secret
// directory, a file, and links inside and out.
func mountWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	for _, d := range []string{"node_modules/leftpad", ".venv/lib", "web/node_modules", "vendor", ".ssh", "src"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"deps": "vendor", "out": t.TempDir(), "keys": ".ssh", "up": ".."} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func TestReadOnlyMounts(t *testing.T) {
	ws := mountWorkspace(t)
	tests := []struct {
		name   string
		mounts []string
		want   job.Code
		clean  []string
	}{
		{"node_modules and .venv", []string{"node_modules", ".venv"}, "", []string{"node_modules", ".venv"}},
		{"nested dependency dir, cleaned", []string{"./web//node_modules/"}, "", []string{"web/node_modules"}},
		{"plain directory", []string{"vendor"}, "", []string{"vendor"}},
		{"link inside the workspace", []string{"deps"}, "", []string{"deps"}},
		{"absolute", []string{"/usr/lib"}, job.CodePathEscape, nil},
		{"dotdot", []string{"../x"}, job.CodePathEscape, nil},
		{"dotdot inside then out", []string{"a/../../x"}, job.CodePathEscape, nil},
		{"NUL", []string{"node_modules\x00"}, job.CodePathEscape, nil},
		{"control byte", []string{"node\nmodules"}, job.CodePathEscape, nil},
		{"invalid UTF-8", []string{"\xff"}, job.CodePathEscape, nil},
		{"empty", []string{""}, job.CodePathEscape, nil},
		{"the workspace itself", []string{"."}, job.CodeInvalidRequest, nil},
		{"secret directory", []string{".ssh"}, job.CodePathEscape, nil},
		{"VCS metadata", []string{".git"}, job.CodePathEscape, nil},
		{"link to a secret directory", []string{"keys"}, job.CodePathEscape, nil},
		{"link out of the workspace", []string{"out"}, job.CodePathEscape, nil},
		{"link to the workspace's parent", []string{"up"}, job.CodePathEscape, nil},
		{"missing", []string{"nope"}, job.CodeInvalidRequest, nil},
		{"a file", []string{"file"}, job.CodeInvalidRequest, nil},
		{"overlapping", []string{"web", "web/node_modules"}, job.CodeInvalidRequest, nil},
		{"duplicate", []string{"vendor", "vendor/"}, job.CodeInvalidRequest, nil},
		{"too many", make([]string, MaxReadOnlyMounts+1), job.CodeInvalidRequest, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base(t)
			r.Workspace.Path = ws
			r.Workspace.ReadOnlyMounts = append([]string{}, tt.mounts...)
			err := Request(&r, cfg)
			if got := job.CodeOf(err); got != tt.want {
				t.Fatalf("readonly_mounts %q: code %q (%v), want %q", tt.mounts, got, err, tt.want)
			}
			if err == nil {
				if diff := cmp.Diff(tt.clean, r.Workspace.ReadOnlyMounts); diff != "" {
					t.Errorf("readonly_mounts normalized (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestCaches(t *testing.T) {
	tests := []struct {
		name   string
		caches []job.Cache
		want   job.Code
	}{
		{"go build cache", []job.Cache{{Name: "go-build", Path: "/cache/go-build"}}, ""},
		{"two caches", []job.Cache{{Name: "go-build", Path: "/cache/go-build"}, {Name: "pip.v1", Path: "/cache/pip"}}, ""},
		{"under /tmp", []job.Cache{{Name: "npm", Path: "/tmp/npm-cache"}}, ""},
		{"uppercase name", []job.Cache{{Name: "Go", Path: "/cache/go"}}, job.CodeInvalidRequest},
		{"name with slash", []job.Cache{{Name: "a/b", Path: "/cache/go"}}, job.CodeInvalidRequest},
		{"name starting with a dot", []job.Cache{{Name: ".locks", Path: "/cache/go"}}, job.CodeInvalidRequest},
		{"dotdot name", []job.Cache{{Name: "..", Path: "/cache/go"}}, job.CodeInvalidRequest},
		{"empty name", []job.Cache{{Path: "/cache/go"}}, job.CodeInvalidRequest},
		{"name too long", []job.Cache{{Name: strings.Repeat("a", 65), Path: "/cache/go"}}, job.CodeInvalidRequest},
		{"relative path", []job.Cache{{Name: "go", Path: "cache/go"}}, job.CodeInvalidRequest},
		{"unclean path", []job.Cache{{Name: "go", Path: "/cache/../usr/lib"}}, job.CodeInvalidRequest},
		{"root", []job.Cache{{Name: "go", Path: "/"}}, job.CodeInvalidRequest},
		{"workspace", []job.Cache{{Name: "go", Path: "/workspace"}}, job.CodeInvalidRequest},
		{"inside the workspace", []job.Cache{{Name: "go", Path: "/workspace/.cache"}}, job.CodeInvalidRequest},
		{"system dir", []job.Cache{{Name: "go", Path: "/usr/lib/go"}}, job.CodeInvalidRequest},
		{"/etc", []job.Cache{{Name: "go", Path: "/etc"}}, job.CodeInvalidRequest},
		{"/proc", []job.Cache{{Name: "go", Path: "/proc/self"}}, job.CodeInvalidRequest},
		{"/tmp itself", []job.Cache{{Name: "go", Path: "/tmp"}}, job.CodeInvalidRequest},
		{"control byte", []job.Cache{{Name: "go", Path: "/cache/\ngo"}}, job.CodePathEscape},
		{"invalid UTF-8", []job.Cache{{Name: "go", Path: "/cache/\xff"}}, job.CodePathEscape},
		{"duplicate name", []job.Cache{{Name: "go", Path: "/a"}, {Name: "go", Path: "/b"}}, job.CodeInvalidRequest},
		{"nested paths", []job.Cache{{Name: "a", Path: "/cache"}, {Name: "b", Path: "/cache/b"}}, job.CodeInvalidRequest},
		{"too many", make([]job.Cache, MaxCaches+1), job.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base(t)
			r.Workspace.Caches = tt.caches
			if got := job.CodeOf(Request(&r, cfg)); got != tt.want {
				t.Errorf("caches %+v: code %q, want %q", tt.caches, got, tt.want)
			}
		})
	}
}

func TestTmpDefaultFollowsMemory(t *testing.T) {
	tests := []struct {
		name     string
		memory   int64
		defaults job.Limits
		max      job.Limits
		want     int64
	}{
		{"default memory", 0, job.Limits{}, job.Limits{}, 1024},
		{"small memory keeps 1 GiB", 256, job.Limits{}, job.Limits{}, 1024},
		{"large memory", 8192, job.Limits{}, job.Limits{}, 8192},
		{"runner default wins", 8192, job.Limits{TmpMB: 300}, job.Limits{}, 300},
		{"capped by the runner maximum", 8192, job.Limits{}, job.Limits{TmpMB: 2048}, 2048},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			c.Defaults, c.Max = tt.defaults, tt.max
			r := base(t)
			r.Limits.MemoryMB = tt.memory
			if err := Request(&r, c); err != nil {
				t.Fatal(err)
			}
			if got := r.Limits.TmpMB; got != tt.want {
				t.Errorf("tmp_mb with memory_mb %d = %d, want %d", tt.memory, got, tt.want)
			}
		})
	}
}
