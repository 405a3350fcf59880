package buildcache

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// open returns caches in a fresh directory; the test waits for their
// background work before its directory is removed.
func open(t *testing.T, opts Options) *Caches {
	t.Helper()
	c, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Wait)
	return c
}

// write puts a file of size bytes in the cache, modified age ago.
func write(t *testing.T, dir, name string, size int, age time.Duration) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Repeat("x", size)), 0o644); err != nil {
		t.Fatal(err)
	}
	when := time.Now().Add(-age)
	if err := os.Chtimes(p, when, when); err != nil {
		t.Fatal(err)
	}
}

// files lists the non-directories under dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// acquire leases name in the local namespace.
func acquire(t *testing.T, c *Caches, name string) *Lease {
	t.Helper()
	l, err := c.Acquire(LocalNamespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLeaseKeepsContentAcrossJobs(t *testing.T) {
	c := open(t, Options{})
	l := acquire(t, c, "go-build")
	write(t, l.Dir, "ab/entry", 3, 0)
	l.Release()
	l2 := acquire(t, c, "go-build")
	defer l2.Release()
	if got, want := l2.Dir, filepath.Join(c.Dir(), LocalNamespace, "go-build"); got != want {
		t.Errorf("cache dir = %q, want %q", got, want)
	}
	if got, want := l2.NotMounted, ""; got != want {
		t.Errorf("NotMounted = %q, want %q", got, want)
	}
	if diff := cmp.Diff([]string{"ab/entry"}, files(t, l2.Dir)); diff != "" {
		t.Errorf("second job's cache (-want +got):\n%s", diff)
	}
}

func TestAcquireRefusesBadNames(t *testing.T) {
	c := open(t, Options{})
	for _, tt := range []struct{ ns, name string }{
		{LocalNamespace, ""}, {LocalNamespace, ".."}, {LocalNamespace, ".locks"}, {LocalNamespace, "a/b"}, {LocalNamespace, "A"},
		{"", "x"}, {".trash", "x"}, {"..", "x"}, {"a/b", "x"}, {".locks", "x"},
	} {
		if _, err := c.Acquire(tt.ns, tt.name); err == nil {
			t.Errorf("Acquire(%q, %q) = nil error, want a refusal", tt.ns, tt.name)
		}
	}
}

func TestTrimEvictsOldestOverTheCap(t *testing.T) {
	// 3 directories, 3 files and a symlink: 7 entries.
	c := open(t, Options{MaxInodes: 5})
	l := acquire(t, c, "go-build")
	write(t, l.Dir, "00/oldest", 40, 3*time.Hour)
	write(t, l.Dir, "01/older", 40, 2*time.Hour)
	write(t, l.Dir, "02/new", 40, time.Minute)
	if err := os.Symlink("/etc/passwd", filepath.Join(l.Dir, "link")); err != nil {
		t.Fatal(err)
	}
	l.Release()
	c.Wait()
	if diff := cmp.Diff([]string{"02/new", "link"}, files(t, l.Dir)); diff != "" {
		t.Errorf("left after the background trim (-want +got):\n%s", diff)
	}
	got, err := c.Trim(LocalNamespace, "go-build")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := got.Usage.Inodes, int64(5); got != want {
		t.Errorf("entries after eviction = %d, want %d", got, want)
	}
	if got.Evicted != 0 || got.Reset {
		t.Errorf("second Trim = %+v, want nothing removed (the cache fits)", got)
	}
}

func TestTrimReportsEviction(t *testing.T) {
	c := open(t, Options{MaxInodes: 2})
	dir := c.Path(LocalNamespace, "x")
	write(t, dir, "a", 0, 3*time.Hour)
	write(t, dir, "b", 0, 2*time.Hour)
	write(t, dir, "c", 0, time.Hour)
	got, err := c.Trim(LocalNamespace, "x")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Trimmed{Usage: Usage{Inodes: 3}, Evicted: 1}, got); diff != "" {
		t.Errorf("Trim (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b", "c"}, files(t, dir)); diff != "" {
		t.Errorf("left (-want +got):\n%s", diff)
	}
}

// TestOverCapCacheIsNotMounted: a cache over a cap while a job holds it
// is left as it is (Busy), and jobs that start meanwhile get an empty
// scratch directory instead of it, until the last job's release trims it.
func TestOverCapCacheIsNotMounted(t *testing.T) {
	c := open(t, Options{MaxInodes: 1})
	l := acquire(t, c, "go-build")
	write(t, l.Dir, "a", 1, time.Hour)
	write(t, l.Dir, "b", 1, 0)
	got, err := c.Trim(LocalNamespace, "go-build")
	if err != nil || !got.Busy {
		t.Errorf("Trim while a job holds the cache = %+v, %v; want Busy", got, err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, files(t, l.Dir)); diff != "" {
		t.Errorf("a busy cache was trimmed (-want +got):\n%s", diff)
	}
	next := acquire(t, c, "go-build")
	if got, want := next.NotMounted, NotMountedOverCap; got != want {
		t.Errorf("lease of an over-cap cache: NotMounted = %q, want %q", got, want)
	}
	if next.Dir == l.Dir || len(files(t, next.Dir)) != 0 {
		t.Errorf("lease of an over-cap cache = %s with %v, want an empty scratch directory", next.Dir, files(t, next.Dir))
	}
	scratch := next.Dir
	next.Release()
	l.Release()
	c.Wait()
	if _, err := os.Lstat(scratch); !os.IsNotExist(err) {
		t.Errorf("scratch directory left after release: %v", err)
	}
	if diff := cmp.Diff([]string{"b"}, files(t, l.Dir)); diff != "" {
		t.Errorf("after the last release (-want +got):\n%s", diff)
	}
	again := acquire(t, c, "go-build")
	defer again.Release()
	if again.NotMounted != "" || again.Dir != l.Dir {
		t.Errorf("lease after the trim = %s (%q), want the cache %s", again.Dir, again.NotMounted, l.Dir)
	}
}

// TestTrimmingCacheIsNotWaitedFor: while a trim holds the cache
// exclusively, a job starting gets a scratch directory at once.
func TestTrimmingCacheIsNotWaitedFor(t *testing.T) {
	c := open(t, Options{})
	acquire(t, c, "x").Release()
	c.Wait()
	trim, err := c.lock(LocalNamespace, "x", unix.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	l := acquire(t, c, "x")
	trim.Close()
	defer l.Release()
	if got, want := l.NotMounted, NotMountedTrimming; got != want {
		t.Errorf("NotMounted = %q, want %q", got, want)
	}
}

func TestCollectRemovesUnusedCaches(t *testing.T) {
	c := open(t, Options{})
	for _, name := range []string{"stale", "fresh", "busy"} {
		l := acquire(t, c, name)
		write(t, l.Dir, "f", 1, 0)
		l.Release()
	}
	c.Wait()
	old := time.Now().Add(-10 * 24 * time.Hour)
	for _, name := range []string{"stale", "busy"} {
		os.Chtimes(filepath.Join(c.Dir(), LocalNamespace, lockDir, name), old, old)
	}
	busy, _ := c.lock(LocalNamespace, "busy", unix.LOCK_SH) // a job holds it
	defer busy.Close()
	removed, err := c.Collect(time.Now(), DefaultMaxAge)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"local/stale"}, removed); diff != "" {
		t.Errorf("collected (-want +got):\n%s", diff)
	}
	for name, want := range map[string]bool{"stale": false, "fresh": true, "busy": true} {
		_, err := os.Stat(c.Path(LocalNamespace, name))
		if got := err == nil; got != want {
			t.Errorf("cache %s exists = %v, want %v", name, got, want)
		}
	}
	l := acquire(t, c, "stale")
	defer l.Release()
	if got := files(t, l.Dir); len(got) != 0 {
		t.Errorf("a collected cache came back with %v", got)
	}
	c.Wait()
	if entries, _ := os.ReadDir(filepath.Join(c.Dir(), trashDir)); len(entries) != 0 {
		t.Errorf("trash after collection = %v, want empty", entries)
	}
}

// TestOpenRetiresTheSharedLayout: caches of the layout every caller
// shared (dir/<name>, dir/.locks) are not adopted by any namespace.
func TestOpenRetiresTheSharedLayout(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "local/planted", 1, 0) // a legacy cache named "local"
	write(t, dir, "go-build/00/entry", 1, 0)
	write(t, dir, lockDir+"/go-build", 0, 0)
	c, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Wait()
	l := acquire(t, c, "go-build")
	defer l.Release()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{trashDir, LocalNamespace}, names); diff != "" {
		t.Errorf("caches directory after Open (-want +got):\n%s", diff)
	}
	if got := files(t, l.Dir); len(got) != 0 {
		t.Errorf("cache go-build holds %v, want nothing of the legacy layout", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, LocalNamespace, "planted")); err == nil {
		t.Errorf("the legacy cache \"local\" became the local namespace")
	}
}
