package rootfs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkOpen compares openat2 with the O_NOFOLLOW walk for a path four
// directories deep.
func BenchmarkOpen(b *testing.B) {
	root := b.TempDir()
	deep := filepath.Join(root, "a", "b", "c", "d")
	os.MkdirAll(deep, 0o755)
	os.WriteFile(filepath.Join(deep, "f.log"), []byte("x"), 0o644)
	loc := Location{Root: root, Rel: "a/b/c/d/f.log"}
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		b.Run(name, func(b *testing.B) {
			forceWalk = walk
			defer func() { forceWalk = false }()
			for b.Loop() {
				f, err := Open(loc, unix.O_RDONLY)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}
