// Package rootfs resolves caller-supplied paths inside policy roots and
// opens them through file descriptors, so a path swapped for a symlink
// between the policy check and the read cannot escape its root.
//
// Locate is the lexical step: it joins a path to the working directory,
// removes "." and "..", and finds the policy root the result lies under.
// Open is the kernel step: it opens the root and then the remaining path
// with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS),
// or, where the kernel lacks openat2, with a component-by-component openat
// walk using O_NOFOLLOW. Symlinks below a root are refused, even ones that
// point inside it: what was checked is exactly what is opened.
package rootfs

import (
	"errors"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Errors; callers map them to validation.path_escape.
var (
	ErrEmpty   = errors.New("path is empty")
	ErrOddByte = errors.New("path contains NUL or invalid UTF-8")
	ErrOutside = errors.New("path is outside every policy root")
	ErrSymlink = errors.New("path goes through a symlink")
	ErrNotDir  = errors.New("path component is not a directory")
	ErrTooLong = errors.New("path is too long")
)

// MaxPathLen bounds a caller path.
const MaxPathLen = 4096

// Location is a path split into its policy root and the clean path below
// it ("." for the root itself).
type Location struct {
	Root string
	Rel  string
}

// Abs is the lexical absolute path.
func (l Location) Abs() string { return filepath.Join(l.Root, l.Rel) }

// Locate resolves p against cwd lexically and returns the most specific
// root that contains it. roots must be clean absolute paths.
func Locate(roots []string, cwd, p string) (Location, error) {
	if p == "" {
		return Location{}, ErrEmpty
	}
	if len(p) > MaxPathLen {
		return Location{}, ErrTooLong
	}
	if strings.ContainsRune(p, 0) || !utf8.ValidString(p) {
		return Location{}, ErrOddByte
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(cwd, p)
	}
	abs = filepath.Clean(abs)
	best := Location{}
	for _, r := range roots {
		var rel string
		switch {
		case abs == r:
			rel = "."
		case r != "/" && strings.HasPrefix(abs, r+"/"):
			rel = abs[len(r)+1:]
		default:
			continue
		}
		if len(r) > len(best.Root) {
			best = Location{Root: r, Rel: rel}
		}
	}
	if best.Root == "" {
		return Location{}, ErrOutside
	}
	return best, nil
}
