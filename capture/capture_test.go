package capture

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func sum(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func TestStreamTruncatesAndHashesAll(t *testing.T) {
	var live strings.Builder
	s := New(5, func(p []byte) { live.Write(p) })
	s.Write([]byte("hello "))
	s.Write([]byte("world"))
	out := s.Output()
	if out.Text != "hello" || !out.Truncated || out.TotalBytes != 11 {
		t.Errorf("Output() = %+v, want text %q truncated 11 bytes", out, "hello")
	}
	if got, want := out.SHA256, sum("hello world"); got != want {
		t.Errorf("sha256 = %s, want hash of all bytes %s", got, want)
	}
	if live.String() != "hello world" {
		t.Errorf("live saw %q, want every byte", live.String())
	}
}

func TestStreamUnderLimit(t *testing.T) {
	s := New(100, nil)
	s.Write([]byte("ok\n"))
	out := s.Output()
	if out.Text != "ok\n" || out.Truncated || out.Base64 != "" {
		t.Errorf("Output() = %+v", out)
	}
}

func TestStreamNonUTF8(t *testing.T) {
	raw := []byte{'a', 0xff, 0xfe, 'b', 0}
	s := New(100, nil)
	s.Write(raw)
	out := s.Output()
	b, err := json.Marshal(out)
	if err != nil || !json.Valid(b) {
		t.Fatalf("marshal: %v", err)
	}
	got, _ := base64.StdEncoding.DecodeString(out.Base64)
	if string(got) != string(raw) {
		t.Errorf("base64 = %q, want exact bytes %q", got, raw)
	}
	if !strings.Contains(out.Text, "\uFFFD") {
		t.Errorf("text %q should carry replacement characters", out.Text)
	}
}

func TestStreamCutRuneAtCap(t *testing.T) {
	s := New(4, nil)
	s.Write([]byte("abc\u00e9z")) // é is 2 bytes; cap cuts it in half
	out := s.Output()
	if out.Text != "abc" || out.Base64 != "" {
		t.Errorf("Output() = %+v, want text %q without base64", out, "abc")
	}
}

func TestStreamConcurrentWrites(t *testing.T) {
	s := New(1<<20, nil)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				s.Write([]byte("x"))
			}
		}()
	}
	wg.Wait()
	if out := s.Output(); out.TotalBytes != 8000 || len(out.Text) != 8000 {
		t.Errorf("total = %d, text = %d, want 8000", out.TotalBytes, len(out.Text))
	}
}

// TestStreamBase64MatchesRetained: when output is not UTF-8 and the cap
// cuts a multi-byte character, base64 still carries exactly the retained
// bytes (the content of stdout.txt).
func TestStreamBase64MatchesRetained(t *testing.T) {
	tests := []struct {
		name  string
		limit int64
		in    string
	}{
		{"invalid then cut rune", 5, "\xffabc\u00e9z"},
		{"invalid at the end", 4, "ab\xff\xfexyz"},
		{"cut inside a 4-byte rune", 6, "\xfe\U0001F600\U0001F600"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.limit, nil)
			s.Write([]byte(tt.in))
			out := s.Output()
			got, err := base64.StdEncoding.DecodeString(out.Base64)
			if err != nil || string(got) != string(s.Retained(-1)) {
				t.Errorf("base64 = %q (%v), want the retained bytes %q", got, err, s.Retained(-1))
			}
			if !utf8.ValidString(out.Text) || !out.Truncated {
				t.Errorf("text %q truncated %v; want valid UTF-8 and truncated", out.Text, out.Truncated)
			}
		})
	}
}
