package hostcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSandboxReach(t *testing.T) {
	dir := t.TempDir()
	parent := filepath.Dir(dir) // 0700: t.TempDir's own directory
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o1777)

	c := sandboxReach(tmp, true)
	if c.Status != StatusFail {
		t.Fatalf("status = %q (%s), want fail", c.Status, c.Found)
	}
	if want := "chmod o+x " + parent + " " + dir + ", or set TMPDIR"; !strings.HasPrefix(c.Fix, want) {
		t.Errorf("fix = %q, want it to start with %q", c.Fix, want)
	}
	if want := dir + " (-rwx------)"; !strings.Contains(c.Found, want) {
		t.Errorf("found = %q, want it to name %q", c.Found, want)
	}
	if c := sandboxReach(tmp, false); c.Status != StatusOK {
		t.Errorf("unprivileged runner: status = %q (%s), want ok", c.Status, c.Found)
	}
	for _, d := range []string{parent, dir} {
		if err := os.Chmod(d, 0o751); err != nil {
			t.Fatal(err)
		}
	}
	if c := sandboxReach(tmp, true); c.Status != StatusOK {
		t.Errorf("after chmod o+x: status = %q (%s), want ok", c.Status, c.Found)
	}
}

func TestStoreDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		store string
		want  want
	}{
		{"existing", dir, want{StatusOK, dir + " exists, mode -rwxr-x---", ""}},
		{"to be created", filepath.Join(dir, "a", "b"), want{StatusOK, "will be created under " + dir, ""}},
		{"a file", file, want{StatusFail, "not a directory", "another --store-dir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, []Check{storeDirCheck(tt.store)}, map[string]want{"store_dir": tt.want})
		})
	}
}

func TestFreeSpace(t *testing.T) {
	dir := t.TempDir()
	expect(t, []Check{freeSpace(filepath.Join(dir, "not-yet"), 0)}, map[string]want{
		"store_free_space": {StatusOK, "on the filesystem of " + dir, ""},
	})
	expect(t, []Check{freeSpace(dir, 1<<62)}, map[string]want{
		"store_free_space": {StatusWarn, "GiB free of", "move the store (--store-dir)"},
	})
}
