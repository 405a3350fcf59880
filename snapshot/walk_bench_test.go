package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkFingerprint measures the per-job cost of an overlay snapshot
// on an unchanged 10,000-file workspace (the stat walk that finds the
// cached layer).
func BenchmarkFingerprint(b *testing.B) {
	src := b.TempDir()
	for i := 0; i < 10000; i++ {
		p := filepath.Join(src, fmt.Sprintf("pkg%03d", i/100), fmt.Sprintf("f%05d.txt", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("x"), 0o644)
	}
	root := openRoot(b, src)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := fingerprint(context.Background(), root, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
