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

func open(t *testing.T) *Caches {
	t.Helper()
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
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

func TestLeaseKeepsContentAcrossJobs(t *testing.T) {
	c := open(t)
	l, err := c.Acquire("go-build")
	if err != nil {
		t.Fatal(err)
	}
	write(t, l.Dir, "ab/entry", 3, 0)
	l.Release()
	l2, err := c.Acquire("go-build")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release()
	if got, want := l2.Dir, filepath.Join(c.Dir(), "go-build"); got != want {
		t.Errorf("cache dir = %q, want %q", got, want)
	}
	if diff := cmp.Diff([]string{"ab/entry"}, files(t, l2.Dir)); diff != "" {
		t.Errorf("second job's cache (-want +got):\n%s", diff)
	}
}

func TestAcquireRefusesBadNames(t *testing.T) {
	c := open(t)
	for _, name := range []string{"", "..", ".locks", "a/b", "A"} {
		if _, err := c.Acquire(name); err == nil {
			t.Errorf("Acquire(%q) = nil error, want a refusal", name)
		}
	}
}

func TestTrimEvictsOldestOverTheCap(t *testing.T) {
	c := open(t)
	l, _ := c.Acquire("go-build")
	write(t, l.Dir, "00/oldest", 40, 3*time.Hour)
	write(t, l.Dir, "01/older", 40, 2*time.Hour)
	write(t, l.Dir, "02/new", 40, time.Minute)
	if err := os.Symlink("/etc/passwd", filepath.Join(l.Dir, "link")); err != nil {
		t.Fatal(err)
	}
	l.Release()
	got, err := c.Trim("go-build", 50)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Trimmed{Bytes: 120, Evicted: 2, EvictedBytes: 80}, got); diff != "" {
		t.Errorf("Trim (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"02/new", "link"}, files(t, l.Dir)); diff != "" {
		t.Errorf("left after eviction (-want +got):\n%s", diff)
	}
	if got, _ := c.Trim("go-build", 50); got.Evicted != 0 {
		t.Errorf("second Trim evicted %d files, want 0 (the cache fits)", got.Evicted)
	}
}

func TestTrimLeavesACacheInUse(t *testing.T) {
	c := open(t)
	l, _ := c.Acquire("go-build")
	write(t, l.Dir, "big", 100, time.Hour)
	other, _ := c.Acquire("go-build") // a concurrent job
	l.Release()
	got, err := c.Trim("go-build", 10)
	if err != nil || !got.Busy {
		t.Errorf("Trim while a job holds the cache = %+v, %v; want Busy", got, err)
	}
	if diff := cmp.Diff([]string{"big"}, files(t, l.Dir)); diff != "" {
		t.Errorf("a busy cache was trimmed (-want +got):\n%s", diff)
	}
	other.Release()
	if got, _ := c.Trim("go-build", 10); got.Evicted != 1 {
		t.Errorf("Trim after the last job = %+v, want 1 file evicted", got)
	}
}

func TestCollectRemovesUnusedCaches(t *testing.T) {
	c := open(t)
	for _, name := range []string{"stale", "fresh", "busy"} {
		l, err := c.Acquire(name)
		if err != nil {
			t.Fatal(err)
		}
		write(t, l.Dir, "f", 1, 0)
		l.Release()
	}
	old := time.Now().Add(-10 * 24 * time.Hour)
	for _, name := range []string{"stale", "busy"} {
		os.Chtimes(filepath.Join(c.Dir(), lockDir, name), old, old)
	}
	busy, _ := c.lock("busy", unix.LOCK_SH) // a job holds it
	defer busy.Close()
	removed, err := c.Collect(time.Now(), DefaultMaxAge)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"stale"}, removed); diff != "" {
		t.Errorf("collected (-want +got):\n%s", diff)
	}
	for name, want := range map[string]bool{"stale": false, "fresh": true, "busy": true} {
		_, err := os.Stat(filepath.Join(c.Dir(), name))
		if got := err == nil; got != want {
			t.Errorf("cache %s exists = %v, want %v", name, got, want)
		}
	}
	l, err := c.Acquire("stale")
	if err != nil {
		t.Fatalf("Acquire after collection: %v", err)
	}
	defer l.Release()
	if got := files(t, l.Dir); len(got) != 0 {
		t.Errorf("a collected cache came back with %v", got)
	}
}
