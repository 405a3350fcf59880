package store

import (
	"strconv"
	"testing"
)

// BenchmarkClaim is the cost of creating one record (staging directory,
// first file, digest, rename), and of answering a repeated claim of a
// taken id (read and compare the stored digest).
func BenchmarkClaim(b *testing.B) {
	r, err := OpenRecords(b.TempDir(), Tasks)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("new", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if ok, err := r.Claim("t"+strconv.Itoa(i), "d", writeMarker); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("repeat", func(b *testing.B) {
		for b.Loop() {
			if ok, err := r.Claim("t0", "d", writeMarker); ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}
