package buildcache

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// blocks sums st_blocks*512 and counts the entries under dir, as lstat
// reports them.
func blocks(t *testing.T, dir string) (bytes, inodes int64) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		bytes += st.Blocks * 512
		inodes++
		return nil
	})
	return bytes, inodes
}

// TestCapCountsEveryEntryType: directories, symlinks and empty files
// count as entries and by their blocks, not only regular files by size.
func TestCapCountsEveryEntryType(t *testing.T) {
	outside := t.TempDir()
	write(t, outside, "big", 1<<20, 0)
	for _, tt := range []struct {
		name string
		make func(t *testing.T, dir string)
		// inodes is how many entries make puts in the cache.
		inodes int64
	}{
		{"empty files", func(t *testing.T, dir string) {
			for i := range 10 {
				write(t, dir, fmt.Sprint("e", i), 0, 0)
			}
		}, 10},
		{"directories", func(t *testing.T, dir string) {
			for i := range 10 {
				os.MkdirAll(filepath.Join(dir, fmt.Sprint("d", i), "sub"), 0o755)
			}
		}, 20},
		{"symlinks", func(t *testing.T, dir string) {
			for i := range 10 {
				os.Symlink(filepath.Join(outside, "big"), filepath.Join(dir, fmt.Sprint("l", i)))
			}
		}, 10},
		{"sparse and full files", func(t *testing.T, dir string) {
			f, _ := os.Create(filepath.Join(dir, "sparse"))
			f.Truncate(1 << 30)
			f.Close()
			write(t, dir, "full", 64<<10, 0)
		}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := open(t, Options{})
			dir := c.Path(LocalNamespace, "x")
			os.MkdirAll(dir, 0o755)
			tt.make(t, dir)
			wantBytes, wantInodes := blocks(t, dir)
			if wantInodes != tt.inodes {
				t.Fatalf("setup made %d entries, want %d", wantInodes, tt.inodes)
			}
			u, _, err := c.measure(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := u, (Usage{Bytes: wantBytes, Inodes: wantInodes}); got != want {
				t.Errorf("usage = %+v, want %+v", got, want)
			}
			// One entry under the count is over the cap.
			small := open(t, Options{MaxInodes: tt.inodes - 1})
			sdir := small.Path(LocalNamespace, "x")
			os.MkdirAll(sdir, 0o755)
			tt.make(t, sdir)
			got, err := small.Trim(LocalNamespace, "x")
			if err != nil {
				t.Fatal(err)
			}
			if got.Evicted == 0 && !got.Reset {
				t.Errorf("Trim of %d entries with a cap of %d = %+v, want entries removed", tt.inodes, tt.inodes-1, got)
			}
			if _, n := blocks(t, sdir); n > tt.inodes-1 {
				t.Errorf("entries after Trim = %d, want at most %d", n, tt.inodes-1)
			}
		})
	}
}

// TestBytesCapCountsBlocks: the byte cap is on allocated blocks, so a
// sparse 1 GiB file holding nothing fits a small cap and a cache of many
// small files does not hide behind their sizes.
func TestBytesCapCountsBlocks(t *testing.T) {
	c := open(t, Options{MaxBytes: 64 << 10})
	dir := c.Path(LocalNamespace, "x")
	for i := range 40 {
		write(t, dir, fmt.Sprint("f", i), 1, time.Duration(40-i)*time.Minute)
	}
	bytes, _ := blocks(t, dir)
	if bytes <= 64<<10 {
		t.Skipf("this filesystem allocates %d bytes for 40 one-byte files; the test needs more than the cap", bytes)
	}
	got, err := c.Trim(LocalNamespace, "x")
	if err != nil {
		t.Fatal(err)
	}
	if got.Evicted == 0 {
		t.Errorf("Trim = %+v, want one-byte files evicted by their blocks", got)
	}
	if after, _ := blocks(t, dir); after > 64<<10 {
		t.Errorf("blocks after Trim = %d, want at most %d", after, 64<<10)
	}
}
