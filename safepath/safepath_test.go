package safepath

import (
	"errors"
	"testing"
)

func TestClean(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{".", ".", nil},
		{"src", "src", nil},
		{"src/", "src", nil},
		{"./src//pkg/./", "src/pkg", nil},
		{"a/../b", "b", nil},
		{"a/b/../../c", "c", nil},
		{"a/..", ".", nil},
		{"", "", ErrEmpty},
		{"/etc", "", ErrAbsolute},
		{"..", "", ErrEscape},
		{"../x", "", ErrEscape},
		{"a/../../x", "", ErrEscape},
		{"a/../..", "", ErrEscape},
		{"a\\..\\b", "", ErrAbsolute},
		{"a\x00b", "", ErrOddByte},
		{"a\nb", "", ErrOddByte},
		{"a\x7fb", "", ErrOddByte},
		{"\xff\xfe", "", ErrOddByte},
		{"caf\u00e9/na\u00efve", "caf\u00e9/na\u00efve", nil},
	}
	for _, tt := range tests {
		got, err := Clean(tt.in)
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("Clean(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		p, dir string
		want   bool
	}{
		{"a/b", "a", true},
		{"a", "a", true},
		{"ab", "a", false},
		{"x", ".", true},
	}
	for _, tt := range tests {
		if got := Within(tt.p, tt.dir); got != tt.want {
			t.Errorf("Within(%q, %q) = %v, want %v", tt.p, tt.dir, got, tt.want)
		}
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{".", "a/../b", "../x", "/abs", "a\x00", "a//b/./c/..", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := Clean(p)
		if err != nil {
			return
		}
		// A clean path never starts with "/" or "..", and cleaning is idempotent.
		if got == ".." || len(got) >= 3 && got[:3] == "../" || len(got) > 0 && got[0] == '/' {
			t.Fatalf("Clean(%q) = %q escapes", p, got)
		}
		again, err := Clean(got)
		if err != nil || again != got {
			t.Fatalf("Clean(Clean(%q)) = %q, %v; want %q", p, again, err, got)
		}
	})
}
