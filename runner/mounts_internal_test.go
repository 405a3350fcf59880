package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"testing"
)

// walkDirDigest is mountsDigest as it was written with filepath.WalkDir
// (which reads directories by path): the digest format replay compares
// across runs, pinned here.
func walkDirDigest(t *testing.T, rels, sources []string) string {
	t.Helper()
	h := sha256.New()
	for i, src := range sources {
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			fmt.Fprintf(h, "%s %s %d %d\x00", path.Join(rels[i], filepath.ToSlash(rel)), info.Mode().Type(), info.Size(), info.ModTime().UnixNano())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestMountsDigestFormat: the descriptor-relative digest equals the one
// stored runs hold, and it never lists what a symlink in a mount points
// at.
func TestMountsDigestFormat(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	for p, c := range map[string]string{
		"node_modules/a/index.js": "a", "node_modules/b/x/y.js": "yy", "node_modules/.bin/z": "", "vendor/v.go": "v",
	} {
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "node_modules", "link")); err != nil {
		t.Fatal(err)
	}
	rels := []string{"node_modules", "vendor"}
	sources := []string{filepath.Join(ws, "node_modules"), filepath.Join(ws, "vendor")}
	got, err := mountsDigest(context.Background(), rels, sources)
	if err != nil {
		t.Fatal(err)
	}
	if want := walkDirDigest(t, rels, sources); got != want {
		t.Errorf("mountsDigest = %s, want the WalkDir digest %s", got, want)
	}
	if err := os.Symlink(filepath.Join(ws, "vendor"), filepath.Join(ws, "node_modules2")); err != nil {
		t.Fatal(err)
	}
	if _, err := mountsDigest(context.Background(), []string{"node_modules2"}, []string{filepath.Join(ws, "node_modules2")}); err == nil {
		t.Error("mountsDigest of a mount source swapped for a symlink succeeded")
	}
}
