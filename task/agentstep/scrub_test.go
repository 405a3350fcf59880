package agentstep

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scrubStream writes input to a fresh scrubLog in the given chunk sizes
// (0: one byte at a time, else random sizes up to chunk) and returns what
// reached the log file and the emit callback.
func scrubStream(t *testing.T, secrets []string, input []byte, chunk int, seed uint64) (file, emitted []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.log")
	var live bytes.Buffer
	l, err := newLog(path, newScrubber(secrets), DefaultMaxLogBytes, func(p []byte) { live.Write(p) })
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	for rest := input; len(rest) > 0; {
		n := 1
		if chunk > 0 {
			n = 1 + r.IntN(chunk)
		}
		n = min(n, len(rest))
		l.Write(rest[:n])
		rest = rest[n:]
	}
	l.Flush()
	l.Close()
	file, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return file, live.Bytes()
}

// stream builds output of short lines and lines over three 64 KiB pieces
// long. With secrets, copies are placed across each piece boundary of the
// long lines (the first one exactly where the old scrubber cut a line
// written byte by byte: after 64 KiB + 1) and at the end of short lines.
func stream(seed uint64, secrets []string) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 {}\":,"
	text := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return b
	}
	var b []byte
	for i := range 4 {
		for range 1 + r.IntN(20) {
			b = append(b, text(r.IntN(200))...)
			if len(secrets) > 0 && r.IntN(3) == 0 {
				b = append(b, secrets[r.IntN(len(secrets))]...)
			}
			b = append(b, '\n')
		}
		line := text(3*maxPiece + r.IntN(maxPiece))
		for k := 3; k >= 1 && len(secrets) > 0; k-- {
			s := secrets[(i+k)%len(secrets)]
			at := k*maxPiece - r.IntN(len(s)-1)
			line = append(line[:at], append([]byte(s), line[at:]...)...)
		}
		b = append(append(b, line...), '\n')
	}
	return b
}

// TestScrubLogNoSecretWhateverTheWrites: whatever the write boundaries, no
// secret value reaches the log or a subscriber, in any form the stream
// carries it (as is, across a 64 KiB piece boundary, over line ends, as
// a JSON string), and output without secrets is passed through unchanged.
// The old scrubber wrote lines over 64 KiB in independent pieces, so a
// value across a piece boundary was written whole, and it scrubbed each
// line alone, so a value with a newline never matched.
func TestScrubLogNoSecretWhateverTheWrites(t *testing.T) {
	secrets := []string{
		"sk-ant-api03-0123456789abcdef",
		"-----BEGIN KEY-----\nMIIEvQIBADANBg\n-----END KEY-----",
		"quote\"and\\backslash",
		"tool_use",
	}
	forms := []string{`-----BEGIN KEY-----\nMIIEvQIBADANBg\n-----END KEY-----`, `quote\"and\\backslash`}
	inserted := append(append([]string{}, secrets...), forms...)
	for _, chunk := range []int{0, 3, 100, 4096, 70 << 10} {
		for seed := range uint64(2) {
			input := stream(seed, inserted)
			file, live := scrubStream(t, secrets, input, chunk, seed)
			for _, s := range inserted {
				if bytes.Contains(file, []byte(s)) || bytes.Contains(live, []byte(s)) {
					t.Errorf("chunk %d seed %d: %q reached the output", chunk, seed, s)
				}
			}
			if got, want := bytes.Count(file, []byte(Redacted)), 12; got < want {
				t.Errorf("chunk %d seed %d: %d redactions, want at least %d", chunk, seed, got, want)
			}
			if !bytes.Equal(file, live) {
				t.Errorf("chunk %d seed %d: the log and the live output differ", chunk, seed)
			}
			clean := stream(seed, nil)
			if file, live := scrubStream(t, secrets, clean, chunk, seed); !bytes.Equal(file, clean) || !bytes.Equal(live, clean) {
				t.Errorf("chunk %d seed %d: output without secrets differs from the input (%d, %d bytes, want %d)", chunk, seed, len(file), len(live), len(clean))
			}
		}
	}
}

// TestScrubLogEmitsWholeLines: a line goes out as soon as its newline is
// written, unless its end may begin a secret.
func TestScrubLogEmitsWholeLines(t *testing.T) {
	var got []string
	l, err := newLog(filepath.Join(t.TempDir(), "out.log"), newScrubber([]string{"secret-value\nline two"}), DefaultMaxLogBytes, func(p []byte) { got = append(got, string(p)) })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, w := range []string{"one\ntw", "o\n", "secret-value\n", "line two and more\n"} {
		l.Write([]byte(w))
	}
	want := []string{"one\n", "two\n", Redacted + " and more\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("emitted %q, want %q", got, want)
	}
}

func TestScrubberHoldback(t *testing.T) {
	s := newScrubber([]string{"abcdefgh"})
	tests := []struct {
		in   string
		want int
	}{
		{"xyz", 3},
		{"xyzabc", 3},
		{"xyzabcdefgh", 11}, // complete: matches, not holdback
		{"xyza", 3},
		{"abcdefg", 0},
	}
	for _, tt := range tests {
		if got := s.holdback([]byte(tt.in)); got != tt.want {
			t.Errorf("holdback(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// TestLogIsCapped: an agent printing without end fills its log up to the
// cap, which then ends with one truncation line; live viewers still get
// every byte.
func TestLogIsCapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.log")
	var live int
	l, err := newLog(path, newScrubber(nil), 1000, func(p []byte) { live += len(p) })
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 99) + "\n")
	for range 50 {
		l.Write(line)
	}
	l.Flush()
	l.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), "log truncated at 1000 bytes"); got != 1 {
		t.Errorf("truncation lines = %d, want 1 (log of %d bytes)", got, len(b))
	}
	if len(b) > 1000+100 {
		t.Errorf("log = %d bytes, want about the 1000-byte cap", len(b))
	}
	if live != 50*len(line) {
		t.Errorf("live viewers got %d bytes, want %d", live, 50*len(line))
	}
}
