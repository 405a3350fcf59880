package backend

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestImageView resolves programs inside the image's root: PATH from
// its env, links followed inside it, nothing found on the host.
func TestImageView(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755)
	os.MkdirAll(filepath.Join(root, "opt", "tool", "bin"), 0o755)
	os.WriteFile(filepath.Join(root, "usr", "bin", "id"), []byte("#!"), 0o755)
	os.WriteFile(filepath.Join(root, "opt", "tool", "bin", "tool"), []byte("#!"), 0o755)
	os.Symlink("/usr/bin/id", filepath.Join(root, "usr", "bin", "whoami"))
	os.Symlink("../../../../../../usr/bin/env", filepath.Join(root, "usr", "bin", "env"))
	v := ImageView(Image{RootFS: root, Env: []string{"PATH=/opt/tool/bin:/usr/bin:relative"}})
	if diff := cmp.Diff([]string{"/opt/tool/bin", "/usr/bin"}, v.Path); diff != "" {
		t.Errorf("ImageView path (-want +got):\n%s", diff)
	}
	for name, want := range map[string]string{"tool": "/opt/tool/bin/tool", "id": "/usr/bin/id", "whoami": "/usr/bin/whoami", "env": "", "sh": ""} {
		if got := v.LookPath(name); got != want {
			t.Errorf("LookPath(%q) = %q, want %q", name, got, want)
		}
	}
	for p, want := range map[string]bool{"/usr/bin/id": true, "/usr/bin/whoami": true, "/usr/bin/env": false, "/bin/sh": false} {
		if got := v.Visible(p); got != want {
			t.Errorf("Visible(%q) = %v, want %v", p, got, want)
		}
	}
	if got := ImageView(Image{RootFS: root}).Path; len(got) == 0 || got[0] != "/usr/local/sbin" {
		t.Errorf("ImageView without PATH = %q, want DefaultImagePath", got)
	}
}

func TestMergeEnv(t *testing.T) {
	got := MergeEnv([]string{"PATH=/img", "A=image", "B=image"}, []string{"B=job", "C=job"})
	want := []string{"PATH=/img", "A=image", "B=job", "C=job"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MergeEnv (-want +got):\n%s", diff)
	}
}
