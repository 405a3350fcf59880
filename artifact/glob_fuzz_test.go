package artifact

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safepath"
	"github.com/agent-runner/agent-runner/snapshot"
	"github.com/agent-runner/agent-runner/validation"
)

// FuzzCollectGlobs feeds artifact globs through request validation and,
// when accepted, through Collect on a workspace that has a sibling
// directory, escaping and inner symlinks, protected files and a deep tree.
// Whatever the glob, nothing outside the workspace, behind a symlink or
// protected is collected, and every copy lands under the artifacts dir.
func FuzzCollectGlobs(f *testing.F) {
	for _, s := range []string{"**", "*", "out/*.txt", "../outside/*", "/etc/passwd", "a/../../x", "**/..", "{out,secrets}/**", "link/*", "[", "out/\\*", ".env*", "**/*.pem", "out/../out/a.txt"} {
		f.Add(s, "")
		f.Add(s, "**/b*")
	}
	base := f.TempDir()
	ws := filepath.Join(base, "ws")
	files := map[string]string{
		"out/a.txt": "a", "out/b.txt": "b", "out/deep/c/d.txt": "d", "secrets/s.txt": "s", ".env": "E", "k.pem": "k", "top.txt": "t",
	}
	for p, c := range files {
		full := filepath.Join(ws, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(c), 0o644)
	}
	os.MkdirAll(filepath.Join(base, "outside"), 0o755)
	os.WriteFile(filepath.Join(base, "outside", "x.txt"), []byte("outside"), 0o644)
	os.Symlink("../outside", filepath.Join(ws, "link"))
	os.Symlink("/etc/passwd", filepath.Join(ws, "out", "passwd"))
	os.Symlink("a.txt", filepath.Join(ws, "out", "inner"))

	f.Fuzz(func(t *testing.T, glob, deny string) {
		req := job.Request{
			Workspace: job.Workspace{Path: ws},
			Command:   job.Command{Argv: []string{"true"}},
			Policy:    job.Policy{ArtifactGlobs: []string{glob}},
		}
		if deny != "" {
			req.Policy.ArtifactDenyGlobs = []string{deny}
		}
		if err := validation.Request(&req, validation.Config{DefaultBackend: "local_process"}); err != nil {
			if c := job.CodeOf(err); c != job.CodeInvalidRequest && c != job.CodePathEscape {
				t.Fatalf("validation of %q = %v", glob, err)
			}
			return
		}
		if strings.HasPrefix(glob, "/") || strings.HasPrefix(glob, "../") || glob == ".." {
			t.Fatalf("escaping glob %q passed validation", glob)
		}
		dest := t.TempDir()
		res, err := Collect(context.Background(), []string{ws}, req.Policy.ArtifactGlobs, req.Policy.ArtifactDenyGlobs, Limits{}, dest)
		if err != nil {
			t.Fatalf("Collect(%q): %v", glob, err)
		}
		for _, a := range res.Artifacts {
			clean, err := safepath.Clean(a.Path)
			if err != nil || clean != a.Path {
				t.Fatalf("glob %q collected %q, not a clean relative path (%v)", glob, a.Path, err)
			}
			if snapshot.Protected(a.Path) {
				t.Fatalf("glob %q collected protected %q", glob, a.Path)
			}
			want, ok := files[a.Path]
			if !ok {
				t.Fatalf("glob %q collected %q, which is not a regular file of the workspace", glob, a.Path)
			}
			b, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(a.Path)))
			if err != nil || string(b) != want {
				t.Fatalf("glob %q: copy of %q = %q, %v", glob, a.Path, b, err)
			}
		}
	})
}
