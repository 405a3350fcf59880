package validation

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/safepath"
	"github.com/agent-runner/agent-runner/snapshot"
)

// Bounds on the mount lists of one request.
const (
	MaxReadOnlyMounts = 16
	MaxCaches         = 8
)

// systemDirs are sandbox paths a cache may not cover or lie under: the
// toolchain view, the kernel's and the sandbox's own mounts, and the
// workspace.
var systemDirs = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
	"/proc", "/dev", "/sys", "/run", "/workspace", "/.agent-runner",
}

// readOnlyMounts checks workspace.readonly_mounts against the resolved
// workspace w.Path: each entry must be a clean relative path naming an
// existing directory inside the workspace (after its symlinks), not a
// secret-protected path, and not overlap another entry. Entries are
// replaced by their clean form.
//
// workspace.readonly_mounts_mode must be empty (read-only), "readonly" or
// "copy_on_write"; it is kept as given, so a request without it hashes as
// it did before the field existed.
func readOnlyMounts(w *job.Workspace) error {
	const field = "workspace.readonly_mounts"
	switch w.ReadOnlyMountsMode {
	case "", job.MountsReadOnly, job.MountsCopyOnWrite:
	default:
		return invalid("workspace.readonly_mounts_mode", `must be "readonly" or "copy_on_write"`).With("mode", w.ReadOnlyMountsMode)
	}
	if len(w.ReadOnlyMounts) > MaxReadOnlyMounts {
		return invalid(field, "too many entries").With("max", MaxReadOnlyMounts)
	}
	for i, m := range w.ReadOnlyMounts {
		rel, err := safepath.Clean(m)
		if err != nil {
			return escape(field, m, err)
		}
		if rel == "." {
			return invalid(field, "an entry cannot be the workspace itself").With("path", m)
		}
		if snapshot.Secret(rel) {
			return job.Errorf(job.CodePathEscape, "%s: %s is a protected path", field, rel).With("field", field).With("path", m)
		}
		for _, prev := range w.ReadOnlyMounts[:i] {
			if safepath.Within(rel, prev) || safepath.Within(prev, rel) {
				return invalid(field, "entries must not overlap").With("path", m).With("overlaps", prev)
			}
		}
		if _, err := MountSource(w.Path, rel); err != nil {
			return err
		}
		w.ReadOnlyMounts[i] = rel
	}
	return nil
}

// MountSource resolves the read-only mount rel (clean, relative) of the
// workspace root (resolved) to the host directory to bind: it must exist,
// be a directory, and stay inside root once its symlinks are resolved,
// through no secret-protected path. The runner calls it again just before
// the job runs.
func MountSource(root, rel string) (string, error) {
	const field = "workspace.readonly_mounts"
	real, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return "", invalid(field, "each entry must be an existing directory of the workspace").With("path", rel)
	}
	inside, err := filepath.Rel(root, real)
	if err != nil || inside == "." || inside == ".." || strings.HasPrefix(inside, "../") {
		return "", job.Errorf(job.CodePathEscape, "%s: %s resolves outside the workspace", field, rel).With("field", field).With("path", rel)
	}
	if snapshot.Secret(filepath.ToSlash(inside)) {
		return "", job.Errorf(job.CodePathEscape, "%s: %s resolves to a protected path", field, rel).With("field", field).With("path", rel)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", invalid(field, "each entry must be an existing directory of the workspace").With("path", rel)
	}
	return real, nil
}

// caches checks workspace.caches: a valid name, an absolute clean path
// outside the workspace and the system directories, no duplicate names
// and no overlapping paths.
func caches(cs []job.Cache) error {
	const field = "workspace.caches"
	if len(cs) > MaxCaches {
		return invalid(field, "too many entries").With("max", MaxCaches)
	}
	for i, c := range cs {
		if !buildcache.ValidName(c.Name) {
			return invalid(field, "name must match ^[a-z0-9][a-z0-9._-]{0,63}$").With("name", c.Name)
		}
		if err := cachePath(c.Path); err != nil {
			return err
		}
		for _, prev := range cs[:i] {
			if prev.Name == c.Name {
				return invalid(field, "names must be unique").With("name", c.Name)
			}
			if within(c.Path, prev.Path) || within(prev.Path, c.Path) {
				return invalid(field, "paths must not overlap").With("path", c.Path).With("overlaps", prev.Path)
			}
		}
	}
	return nil
}

func cachePath(p string) error {
	const field = "workspace.caches"
	if !utf8.ValidString(p) || strings.IndexFunc(p, unicode.IsControl) >= 0 || strings.ContainsRune(p, utf8.RuneError) {
		return escape(field, p, safepath.ErrOddByte)
	}
	if len(p) > safepath.MaxLen {
		return escape(field, p, safepath.ErrTooLong)
	}
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" {
		return invalid(field, "path must be an absolute, clean path below /").With("path", p)
	}
	for _, d := range systemDirs {
		if within(p, d) || within(d, p) {
			return invalid(field, "path must not be the workspace or a system directory, or lie above or below one").With("path", p).With("system_dir", d)
		}
	}
	if p == "/tmp" {
		return invalid(field, "path must not be /tmp itself (a directory below it is fine)").With("path", p)
	}
	return nil
}

// within reports whether the clean absolute path p is dir or below it.
func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
