package snapshot

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/agent-runner/agent-runner/safecopy"
)

// Options selects the files of a workspace.
type Options struct {
	Include []string
	Exclude []string
	// MaxBytes and MaxFiles bound the snapshot; zero means unbounded.
	MaxBytes int64
	MaxFiles int
}

// Entry is one selected workspace entry, as the walk saw it.
type Entry struct {
	Rel     string // slash-separated, relative to the workspace root
	Mode    fs.FileMode
	Size    int64
	ModTime int64 // UnixNano
	Dev     uint64
	Ino     uint64
	Target  string // symlink target, relative and inside the workspace
}

// seen is what the copy's open must find again.
func (e Entry) seen() safecopy.Info {
	return safecopy.Info{Mode: e.Mode, Size: e.Size, Dev: e.Dev, Ino: e.Ino, ModTime: e.ModTime}
}

// Skip records an entry left out and why.
type Skip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Skip reasons.
const (
	SkipProtected = "protected"
	SkipExcluded  = "excluded"
	SkipSpecial   = "special_file"
	SkipSymlink   = "symlink_escapes"
)

// Walk calls fn for every selected entry of src in lexical order, parents
// before children. Directories are reported only when they are kept. The
// tree is read from a descriptor of src (itself not a symlink) with
// safecopy: no symlink is followed at any level, so a directory swapped
// for a link while the walk runs is not entered.
func Walk(ctx context.Context, src string, opt Options, fn func(Entry) error) ([]Skip, error) {
	root, err := safecopy.OpenRoot(src)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return walk(ctx, root, opt, fn)
}

func walk(ctx context.Context, root *safecopy.Root, opt Options, fn func(Entry) error) ([]Skip, error) {
	var skips []Skip
	err := root.Walk(ctx, func(rel string, info safecopy.Info) error {
		isDir := info.Mode.IsDir()
		if Protected(rel) {
			skips = append(skips, Skip{rel, SkipProtected})
			return skipEntry(isDir)
		}
		if excluded(rel, isDir, opt.Exclude) {
			skips = append(skips, Skip{rel, SkipExcluded})
			return skipEntry(isDir)
		}
		e := Entry{Rel: rel, Mode: info.Mode, Size: info.Size, ModTime: info.ModTime, Dev: info.Dev, Ino: info.Ino}
		switch {
		case isDir:
			e.Size = 0
			return fn(e)
		case info.Mode&fs.ModeSymlink != 0:
			target, err := root.Readlink(rel)
			if err != nil {
				return err
			}
			if !symlinkInside(rel, target) || !resolvesInside(root, rel, target) {
				skips = append(skips, Skip{rel, SkipSymlink})
				return nil
			}
			if !included(rel, opt.Include) {
				return nil
			}
			e.Target = target
			e.Size = 0
			return fn(e)
		case !info.Mode.IsRegular():
			skips = append(skips, Skip{rel, SkipSpecial})
			return nil
		}
		if !included(rel, opt.Include) {
			return nil
		}
		return fn(e)
	})
	return skips, err
}

func skipEntry(isDir bool) error {
	if isDir {
		return fs.SkipDir
	}
	return nil
}

func excluded(rel string, isDir bool, patterns []string) bool {
	for _, g := range patterns {
		if doublestar.MatchUnvalidated(g, rel) {
			return true
		}
		// "dir/**" excludes the directory itself too.
		if isDir && strings.HasSuffix(g, "/**") && doublestar.MatchUnvalidated(strings.TrimSuffix(g, "/**"), rel) {
			return true
		}
	}
	return false
}

// included reports whether rel is selected by the include globs. A glob
// that matches a directory selects everything below it, so "src" means the
// same as "src/**" (it used to select nothing, silently).
func included(rel string, patterns []string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, g := range patterns {
		for p := rel; p != "."; p = path.Dir(p) {
			if doublestar.MatchUnvalidated(g, p) {
				return true
			}
		}
	}
	return false
}

// symlinkInside reports whether a link at rel with the given target stays
// inside the workspace: the target must be relative and never climb above
// the root when resolved lexically from the link's directory.
func symlinkInside(rel, target string) bool {
	if target == "" || path.IsAbs(target) || strings.ContainsRune(target, 0) {
		return false
	}
	depth := strings.Count(path.Dir(rel), "/") + 1
	if path.Dir(rel) == "." {
		depth = 0
	}
	for _, part := range strings.Split(target, "/") {
		switch part {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return false
			}
		default:
			depth++
		}
	}
	return true
}

// maxLinkHops bounds the links resolvesInside follows (the kernel's
// MAXSYMLINKS is 40); a longer chain is treated as escaping.
const maxLinkHops = 40

// resolvesInside follows target from the directory of the link at rel the
// way the kernel would, through any other links inside root, and reports
// whether it stays under root. symlinkInside alone is lexical: with
// "d/up" -> "..", the target "d/up/d/up/../../.." passes it but climbs out.
// Components that do not exist are taken lexically. Every lookup goes
// through root without following a link; one that meets a link on the way
// (a directory swapped for one since) or fails otherwise counts as an
// escape.
func resolvesInside(root *safecopy.Root, rel, target string) bool {
	var cur []string
	if dir := path.Dir(rel); dir != "." {
		cur = strings.Split(dir, "/")
	}
	pending := strings.Split(target, "/")
	hops := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return false
			}
			cur = cur[:len(cur)-1]
			continue
		}
		next := append(cur[:len(cur):len(cur)], c)
		p := strings.Join(next, "/")
		info, err := root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			cur = next // missing, or below a file: lexical from here
			continue
		case err != nil:
			return false
		case info.Mode&fs.ModeSymlink == 0:
			cur = next
			continue
		}
		hops++
		link, err := root.Readlink(p)
		if err != nil || hops > maxLinkHops || link == "" || path.IsAbs(link) {
			return false
		}
		pending = append(strings.Split(link, "/"), pending...)
	}
	return true
}
