package snapshot

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/safecopy"
	"github.com/agent-runner/agent-runner/safepath"
)

// tree writes files (path -> content) under a new temp dir.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// openRoot opens dir as a safecopy root for the test's lifetime.
func openRoot(t testing.TB, dir string) *safecopy.Root {
	t.Helper()
	r, err := safecopy.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func copied(t *testing.T, src string, opt Options) (Manifest, []string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "snap")
	m, err := Copy(context.Background(), src, dst, opt)
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	var got []string
	filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			rel, _ := filepath.Rel(dst, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(got)
	return m, got
}

func TestProtectedExclusions(t *testing.T) {
	src := tree(t, map[string]string{
		"src/main.py": "x", "README.md": "x",
		".git/config": "x", "sub/.git/HEAD": "x", ".hg/x": "x",
		".venv/bin/python": "x", "venv/lib/x": "x", "target/debug/bin": "x", "node_modules/a/index.js": "x",
		"web/node_modules/b/i.js": "x", ".cache/pip/x": "x", "__pycache__/a.pyc": "x", ".pytest_cache/v": "x",
		".env": "SECRET=1", ".env.local": "SECRET=2", "config/.env.production": "x",
		"id_rsa": "key", "id_rsa.pub": "public", "keys/id_ed25519": "key", "tls/server.pem": "x", "tls/server.key": "x",
		"secrets/db.txt": "x", "app/secrets/token": "x", ".ssh/config": "x", ".aws/credentials": "x",
		".netrc": "x", ".npmrc": "x", "cert.p12": "x",
		".config/gcloud/credentials.db": "x", ".config/app.toml": "x",
	})
	_, got := copied(t, src, Options{})
	want := []string{".config/app.toml", "README.md", "id_rsa.pub", "src/main.py"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("snapshot files (-want +got):\n%s", diff)
	}
}

func TestIncludeExclude(t *testing.T) {
	src := tree(t, map[string]string{"src/a.py": "a", "src/b.txt": "b", "tests/t.py": "t", "docs/d.md": "d", "pyproject.toml": "p"})
	_, got := copied(t, src, Options{Include: []string{"src/**", "tests/**", "pyproject.toml"}, Exclude: []string{"**/*.txt"}})
	want := []string{"pyproject.toml", "src/a.py", "tests/t.py"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("include/exclude (-want +got):\n%s", diff)
	}
	_, got = copied(t, src, Options{Exclude: []string{"docs/**"}})
	if diff := cmp.Diff([]string{"pyproject.toml", "src/a.py", "src/b.txt", "tests/t.py"}, got); diff != "" {
		t.Errorf("exclude dir (-want +got):\n%s", diff)
	}
}

func TestSymlinks(t *testing.T) {
	src := tree(t, map[string]string{"a.txt": "a", "dir/b.txt": "b"})
	links := map[string]string{
		"abs": "/etc/passwd", "up": "../../etc/passwd", "dir/up2": "../../x",
		"in": "a.txt", "dir/in2": "../a.txt", "dir/self": "b.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	m, got := copied(t, src, Options{})
	want := []string{"a.txt", "dir/b.txt", "dir/in2", "dir/self", "in"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("symlinks kept (-want +got):\n%s", diff)
	}
	skipped := map[string]string{}
	for _, s := range m.Skips {
		skipped[s.Path] = s.Reason
	}
	for _, p := range []string{"abs", "up", "dir/up2"} {
		if skipped[p] != SkipSymlink {
			t.Errorf("escaping symlink %q: skip reason %q, want %q", p, skipped[p], SkipSymlink)
		}
	}
}

// TestSymlinkThroughSymlink covers a link whose target passes through
// another link: "d/up" -> ".." is inside (it names the root), and the
// lexical check counts "d/up" as two levels down, but the kernel resolves
// "d/up/.." to the parent of the root, so x reaches /etc/passwd.
func TestSymlinkThroughSymlink(t *testing.T) {
	src := tree(t, map[string]string{"d/f": "f"})
	os.Symlink("..", filepath.Join(src, "d", "up"))
	escape := "d/up/d/up/d/up/d/up" + strings.Repeat("/..", 8) + "/etc/passwd"
	os.Symlink(escape, filepath.Join(src, "x"))
	os.Symlink("d/up/d/f", filepath.Join(src, "y")) // resolves inside
	if !symlinkInside("x", escape) {
		t.Fatal("the lexical check alone should pass x; the test needs a link it cannot see through")
	}
	if real, err := filepath.EvalSymlinks(filepath.Join(src, "x")); err != nil || real != "/etc/passwd" {
		t.Fatalf("x resolves to %q, %v; the test expects /etc/passwd", real, err)
	}
	m, got := copied(t, src, Options{})
	if diff := cmp.Diff([]string{"d/f", "d/up", "y"}, got); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
	if len(m.Skips) != 1 || m.Skips[0] != (Skip{"x", SkipSymlink}) {
		t.Errorf("skips = %+v, want x as %s", m.Skips, SkipSymlink)
	}
}

func TestSocketSkipped(t *testing.T) {
	src := tree(t, map[string]string{"a": "a"})
	l, err := net.Listen("unix", filepath.Join(src, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, got := copied(t, src, Options{})
	if diff := cmp.Diff([]string{"a"}, got); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if len(m.Skips) != 1 || m.Skips[0] != (Skip{"sock", SkipSpecial}) {
		t.Errorf("skips = %+v, want the socket as special_file", m.Skips)
	}
}

func TestSpecialFilesSkipped(t *testing.T) {
	src := tree(t, map[string]string{"a": "a"})
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, got := copied(t, src, Options{})
	if diff := cmp.Diff([]string{"a"}, got); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if len(m.Skips) != 1 || m.Skips[0].Reason != SkipSpecial {
		t.Errorf("skips = %+v, want the fifo as special_file", m.Skips)
	}
}

func TestSetuidDropped(t *testing.T) {
	src := tree(t, map[string]string{"tool": "x"})
	if err := os.Chmod(filepath.Join(src, "tool"), 0o4755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "s")
	if _, err := Copy(context.Background(), src, dst, Options{}); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(dst, "tool"))
	if fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("mode = %v, want 0755 without setuid", fi.Mode())
	}
}

func TestHashDeterminism(t *testing.T) {
	files := map[string]string{"a.txt": "alpha", "d/b.txt": "beta", "d/e/c.bin": "\x00\x01"}
	one, two := tree(t, files), tree(t, files)
	old := time.Now().Add(-48 * time.Hour)
	os.Chtimes(filepath.Join(two, "a.txt"), old, old)
	m1, _ := copied(t, one, Options{})
	m2, _ := copied(t, two, Options{})
	if m1.SHA256 != m2.SHA256 {
		t.Fatalf("same content, different mtimes: %s != %s", m1.SHA256, m2.SHA256)
	}
	h, err := Hash(context.Background(), one, Options{})
	if err != nil || h != m1.SHA256 {
		t.Errorf("Hash() = %s, %v; want the Copy hash %s", h, err, m1.SHA256)
	}
	changes := map[string]func(dir string){
		"content": func(d string) { os.WriteFile(filepath.Join(d, "a.txt"), []byte("alphA"), 0o644) },
		"mode":    func(d string) { os.Chmod(filepath.Join(d, "a.txt"), 0o755) },
		"path":    func(d string) { os.Rename(filepath.Join(d, "a.txt"), filepath.Join(d, "z.txt")) },
		"new dir": func(d string) { os.Mkdir(filepath.Join(d, "empty"), 0o755) },
	}
	for name, change := range changes {
		d := tree(t, files)
		change(d)
		m, _ := copied(t, d, Options{})
		if m.SHA256 == m1.SHA256 {
			t.Errorf("%s change did not change the snapshot hash", name)
		}
	}
}

func TestLimits(t *testing.T) {
	src := tree(t, map[string]string{"a": "12345", "b": "12345"})
	if _, err := Copy(context.Background(), src, filepath.Join(t.TempDir(), "s"), Options{MaxFiles: 1}); err == nil {
		t.Error("MaxFiles 1 with two files: no error")
	}
	if _, err := Copy(context.Background(), src, filepath.Join(t.TempDir(), "s"), Options{MaxBytes: 6}); err == nil {
		t.Error("MaxBytes 6 with 10 bytes: no error")
	}
}

func TestRestoreDetectsTampering(t *testing.T) {
	src := tree(t, map[string]string{"a.txt": "a", "d/b.txt": "b"})
	snap := filepath.Join(t.TempDir(), "snap")
	m, err := Copy(context.Background(), src, snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := Restore(context.Background(), snap, out, m); err != nil {
		t.Fatalf("Restore of an intact snapshot: %v", err)
	}
	if h, _ := Hash(context.Background(), out, Options{}); h != m.SHA256 {
		t.Errorf("restored hash %s, want %s", h, m.SHA256)
	}
	os.WriteFile(filepath.Join(snap, "a.txt"), []byte("changed by the job"), 0o644)
	if err := Restore(context.Background(), snap, filepath.Join(t.TempDir(), "o2"), m); err == nil {
		t.Error("Restore of a modified snapshot succeeded")
	}
	bad := m
	bad.Entries = append([]Record{{Path: "../escape", Type: "file", Mode: "0644"}}, m.Entries...)
	if err := Restore(context.Background(), snap, filepath.Join(t.TempDir(), "o3"), bad); err == nil {
		t.Error("Restore accepted a manifest path with ..")
	}
}

func TestSymlinkInside(t *testing.T) {
	tests := []struct {
		rel, target string
		want        bool
	}{
		{"a", "b", true}, {"d/a", "../b", true}, {"d/a", "../../b", false}, {"a", "../b", false},
		{"a", "/etc/passwd", false}, {"a", "", false}, {"d/e/a", "../../x/y", true}, {"a", "x/../../y", false},
	}
	for _, tt := range tests {
		if got := symlinkInside(tt.rel, tt.target); got != tt.want {
			t.Errorf("symlinkInside(%q, %q) = %v, want %v", tt.rel, tt.target, got, tt.want)
		}
	}
}

func FuzzSymlinkInside(f *testing.F) {
	f.Add("d/a", "../b")
	f.Add("a", "../../x")
	f.Fuzz(func(t *testing.T, rel, target string) {
		if clean, err := safepath.Clean(rel); err != nil || clean != rel || rel == "." {
			return // the walker only passes clean workspace paths
		}
		if !symlinkInside(rel, target) {
			return
		}
		// An accepted link resolved lexically from its directory never
		// starts with "..".
		joined := filepath.Join("/root-marker", filepath.Dir(rel), target)
		if joined != "/root-marker" && !strings.HasPrefix(joined, "/root-marker/") {
			t.Fatalf("symlinkInside(%q, %q) accepted a target resolving to %q", rel, target, joined)
		}
	})
}

func TestResolvesInside(t *testing.T) {
	root := tree(t, map[string]string{"d/e/f": "f"})
	links := map[string]string{"d/up": "..", "loop1": "loop2", "loop2": "loop1", "d/abs": "/etc", "d/e/top": "../.."}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		rel, target string
		want        bool
	}{
		{"x", "d/e/f", true},
		{"x", "d/up/d/e/f", true},
		{"x", "d/up/..", false},
		{"d/x", "up/d/up/..", false},
		{"d/x", "up/up/..", true}, // root/up does not exist: lexical from there
		{"d/e/x", "top/d/e/top/..", false},
		{"x", "d/e/top/d", true},
		{"x", "loop1", false},
		{"x", "d/abs/passwd", false},
		{"x", "missing/../d/e/f", true},
		{"x", "missing/../../x", false},
	}
	r := openRoot(t, root)
	for _, tt := range tests {
		if got := resolvesInside(r, tt.rel, tt.target); got != tt.want {
			t.Errorf("resolvesInside(%q -> %q) = %v, want %v", tt.rel, tt.target, got, tt.want)
		}
	}
}

// FuzzResolvesInside checks resolvesInside against the kernel: whenever it
// accepts a link and the link resolves, the resolved path is inside root.
func FuzzResolvesInside(f *testing.F) {
	for _, s := range []string{"d/e/f", "d/up/d/up/../..", "d/e/top/..", "d/side/../../x", "d/up/d/e/top/d/up/..", "../x", "d/./up/."} {
		f.Add(false, s)
		f.Add(true, s)
	}
	base := f.TempDir()
	root := filepath.Join(base, "a", "b", "root")
	for _, d := range []string{"d/e", "d/e2"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "d/e/f"), []byte("f"), 0o644)
	os.WriteFile(filepath.Join(base, "a", "outside"), []byte("o"), 0o644)
	for name, target := range map[string]string{"d/up": "..", "d/e/top": "../..", "d/side": "e", "d/e2/loop": "../e2/loop"} {
		os.Symlink(target, filepath.Join(root, name))
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		f.Fatal(err)
	}
	r, err := safecopy.OpenRoot(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { r.Close() })
	f.Fuzz(func(t *testing.T, nested bool, target string) {
		rel := "x"
		if nested {
			rel = "d/x"
		}
		if !symlinkInside(rel, target) || !resolvesInside(r, rel, target) {
			return
		}
		link := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.Symlink(target, link); err != nil {
			return
		}
		defer os.Remove(link)
		real, err := filepath.EvalSymlinks(link)
		if err != nil {
			return // does not resolve: nothing to reach
		}
		if real != realRoot && !strings.HasPrefix(real, realRoot+"/") {
			t.Fatalf("link %s -> %q accepted but resolves to %s", rel, target, real)
		}
	})
}

func TestIncludeExcludeTable(t *testing.T) {
	files := map[string]string{
		"main.py": "m", "src/a.py": "a", "src/b.txt": "b", "src/deep/c.py": "c", "tests/t.py": "t",
		"docs/d.md": "d", "docs/api/e.md": "e", "build/out.o": "o",
	}
	tests := []struct {
		name             string
		include, exclude []string
		want             []string
	}{
		{"everything", nil, nil, []string{"build/out.o", "docs/api/e.md", "docs/d.md", "main.py", "src/a.py", "src/b.txt", "src/deep/c.py", "tests/t.py"}},
		{"top-level star is one level", []string{"*.py"}, nil, []string{"main.py"}},
		{"double star at any depth", []string{"**/*.py"}, nil, []string{"main.py", "src/a.py", "src/deep/c.py", "tests/t.py"}},
		{"directory subtree", []string{"src/**"}, nil, []string{"src/a.py", "src/b.txt", "src/deep/c.py"}},
		{"exclude wins over include", []string{"src/**"}, []string{"src/deep/**"}, []string{"src/a.py", "src/b.txt"}},
		{"exclude a bare directory name", nil, []string{"docs", "build"}, []string{"main.py", "src/a.py", "src/b.txt", "src/deep/c.py", "tests/t.py"}},
		{"exclude by extension everywhere", nil, []string{"**/*.md", "**/*.o", "**/*.txt"}, []string{"main.py", "src/a.py", "src/deep/c.py", "tests/t.py"}},
		{"brace alternatives", []string{"{src,tests}/*.py"}, nil, []string{"src/a.py", "tests/t.py"}},
		{"include matching nothing", []string{"nothing/**"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got := copied(t, tree(t, files), Options{Include: tt.include, Exclude: tt.exclude})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("include %q exclude %q (-want +got):\n%s", tt.include, tt.exclude, diff)
			}
		})
	}
}

func TestIncludeDirectoryMeansItsTree(t *testing.T) {
	src := tree(t, map[string]string{"src/a.py": "a", "src/pkg/b.py": "b", "docs/x.md": "x"})
	_, got := copied(t, src, Options{Include: []string{"src"}})
	if diff := cmp.Diff([]string{"src/a.py", "src/pkg/b.py"}, got); diff != "" {
		t.Errorf(`include ["src"] (-want +got):\n%s`, diff)
	}
}

func TestSecret(t *testing.T) {
	tests := []struct {
		rel  string
		want bool
	}{
		{"node_modules", false},
		{"web/node_modules", false},
		{".venv", false},
		{"target", false},
		{"src", false},
		{".git", true},
		{".ssh", true},
		{"node_modules/.ssh", true},
		{".cargo", true},
		{".config/gcloud", true},
		{"node_modules/x/.env", true},
		{"node_modules/x/server.pem", true},
		{"secrets/node_modules", true},
	}
	for _, tt := range tests {
		if got := Secret(tt.rel); got != tt.want {
			t.Errorf("Secret(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
}

// TestOddNamesCopied: names a directory may hold but safepath refuses
// for paths people write (a backslash, a newline, invalid UTF-8) are
// still copied and hashed, as they were before the walk read through a
// descriptor.
func TestOddNamesCopied(t *testing.T) {
	names := []string{"back\\slash", "new\nline", "bad\xffutf8", "d/tab\tname"}
	files := map[string]string{}
	for _, n := range names {
		files[n] = n
	}
	src := tree(t, files)
	m, got := copied(t, src, Options{})
	want := append([]string{}, names...)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("snapshot files (-want +got):\n%s", diff)
	}
	if h, err := Hash(context.Background(), src, Options{}); err != nil || h != m.SHA256 {
		t.Errorf("Hash() = %s, %v; want the Copy hash %s", h, err, m.SHA256)
	}
}
