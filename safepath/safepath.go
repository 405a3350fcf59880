// Package safepath normalizes caller-supplied relative paths (cwd, artifact
// paths, gateway arguments) and rejects anything that could name a file
// outside its root: absolute paths, ".." that climbs out, NUL and control
// bytes, invalid UTF-8.
package safepath

import (
	"errors"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Errors returned by Clean; callers wrap them in validation.path_escape.
var (
	ErrEmpty    = errors.New("path is empty")
	ErrAbsolute = errors.New("path is absolute")
	ErrEscape   = errors.New("path climbs out of its root")
	ErrOddByte  = errors.New("path contains a NUL, control byte or invalid UTF-8")
	ErrTooLong  = errors.New("path is too long")
)

// MaxLen bounds a relative path.
const MaxLen = 4096

// Clean returns p as a clean slash-separated path relative to its root
// ("." for the root itself). p must be relative, valid UTF-8 without control
// characters, and must not climb above the root at any point: "a/../b" is
// fine, "a/../../b" is not.
func Clean(p string) (string, error) {
	if p == "" {
		return "", ErrEmpty
	}
	if len(p) > MaxLen {
		return "", ErrTooLong
	}
	if !utf8.ValidString(p) {
		return "", ErrOddByte
	}
	for _, r := range p {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return "", ErrOddByte
		}
	}
	if strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return "", ErrAbsolute
	}
	depth := 0
	for _, part := range strings.Split(p, "/") {
		switch part {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return "", ErrEscape
			}
		default:
			depth++
		}
	}
	return path.Clean(p), nil
}

// Within reports whether the clean relative path p equals dir or lies below
// it (both already cleaned with Clean).
func Within(p, dir string) bool {
	if dir == "." {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}
