package taskapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTailReadsBoundedChunksOfLines: a tail returns complete lines, at
// most chunkBytes at a time; an unterminated last line only when final; a
// line longer than a chunk in pieces.
func TestTailReadsBoundedChunksOfLines(t *testing.T) {
	long := strings.Repeat("x", chunkBytes+10)
	tests := []struct {
		name    string
		content string
		final   bool
		want    []string
	}{
		{"lines", "a\nb\n", false, []string{"a\nb\n"}},
		{"unterminated waits", "a\nb", false, []string{"a\n"}},
		{"unterminated when final", "a\nb", true, []string{"a\n", "b"}},
		{"long line in pieces", long + "\n", false, []string{long[:chunkBytes], long[chunkBytes:] + "\n"}},
		{"missing file", "", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			if tt.content != "" {
				if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tl := newTail(path)
			defer tl.close()
			var got []string
			for chunk := tl.next(tt.final); chunk != nil; chunk = tl.next(tt.final) {
				if len(chunk) > chunkBytes {
					t.Errorf("chunk of %d bytes, want at most %d", len(chunk), chunkBytes)
				}
				got = append(got, string(chunk))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
		})
	}
}
