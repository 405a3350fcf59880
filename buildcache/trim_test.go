package buildcache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTrimFollowsNoSymlink: links in a cache to a directory and a file
// outside it are counted and evicted as links; nothing outside the cache
// is walked, stat'ed or removed, also when a directory of the cache is
// swapped for a link between the walk and the eviction.
func TestTrimFollowsNoSymlink(t *testing.T) {
	outside := t.TempDir()
	for _, name := range []string{"secret", "sub/a", "sub/b"} {
		write(t, outside, name, 10, 100*time.Hour)
	}
	c := open(t, Options{MaxInodes: 1})
	dir := c.Path(LocalNamespace, "x")
	write(t, dir, "sub/a", 1, 50*time.Hour)
	write(t, dir, "sub/b", 1, 50*time.Hour)
	write(t, dir, "keep", 1, 0)
	os.Symlink(outside, filepath.Join(dir, "dirlink"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "filelink"))
	var walked []string
	testHookWalk = func(rel string) { walked = append(walked, rel) }
	// Between the walk and the eviction the job's sub becomes a link to
	// the outside sub, whose files have the same names.
	testHookBeforeEvict = func() {
		os.Rename(filepath.Join(dir, "sub"), filepath.Join(dir, "moved"))
		os.Symlink(filepath.Join(outside, "sub"), filepath.Join(dir, "sub"))
	}
	t.Cleanup(func() { testHookWalk, testHookBeforeEvict = nil, nil })
	if _, err := c.Trim(LocalNamespace, "x"); err != nil {
		t.Fatal(err)
	}
	for _, rel := range walked {
		if strings.HasPrefix(rel, "dirlink/") {
			t.Errorf("the walk went through a link: %s", rel)
		}
	}
	if diff := cmp.Diff([]string{"secret", "sub/a", "sub/b"}, files(t, outside)); diff != "" {
		t.Errorf("outside the cache after Trim (-want +got):\n%s", diff)
	}
}

// TestTrimBoundsEntries: a cache with more entries than a walk records
// is reset whole instead of sorted.
func TestTrimBoundsEntries(t *testing.T) {
	c := open(t, Options{MaxInodes: 10})
	dir := c.Path(LocalNamespace, "x")
	os.MkdirAll(dir, 0o755)
	for i := range c.bound() + 10 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	got, err := c.Trim(LocalNamespace, "x")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Reset || !got.Usage.Truncated || got.Usage.Inodes != c.bound()+1 {
		t.Errorf("Trim = %+v, want a reset after %d entries", got, c.bound()+1)
	}
	c.Wait()
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("reset cache still at %s: %v", dir, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(c.Dir(), trashDir)); len(entries) != 0 {
		t.Errorf("trash after the reset = %v, want empty", entries)
	}
}
