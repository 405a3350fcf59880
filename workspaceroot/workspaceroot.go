// Package workspaceroot decides whether a host path a caller names (a job's
// workspace.path, MCP's workspace_path, a task's local repository) lies
// under the directories the operator approved (serve's --workspace-root)
// and outside the run store. Every door that accepts such a path calls
// Roots.Check; the local CLI, the operator's own shell, does not.
package workspaceroot

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode"

	"github.com/agent-runner/agent-runner/job"
)

// Roots is the operator's rule. The zero value refuses every path.
type Roots struct {
	// Dirs are the approved directories; a path must equal one or lie
	// below it, before and after its symlinks are resolved.
	Dirs []string
	// Excluded are refused even under a root, and so is any path that
	// contains one of them (a workspace holding the run store would copy
	// other jobs' records): the run store.
	Excluded []string
}

// New returns Roots whose directories are absolute (made so now, against
// the working directory); a directory that does not exist is an error.
// With no dirs, the working directory is the one root.
func New(dirs []string, excluded ...string) (*Roots, error) {
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	r := &Roots{}
	for _, d := range dirs {
		abs, err := dir(d)
		if err != nil {
			return nil, job.Wrap(job.CodeInvalidRequest, err, "workspace root "+d+" is not a usable directory")
		}
		r.Dirs = append(r.Dirs, abs)
	}
	for _, d := range excluded {
		if abs, err := filepath.Abs(d); err == nil {
			r.Excluded = append(r.Excluded, abs)
		}
	}
	return r, nil
}

// Check returns p as an absolute path with its symlinks resolved when it
// lies under a root and away from the excluded directories. A path with a
// ".." element, NUL or control bytes, one outside the roots (as written or
// once resolved), and one inside or around an excluded directory is
// validation.path_escape; a path under a root that does not exist is
// validation.invalid_request (outside the roots, existence is not
// disclosed).
func (r Roots) Check(p string) (string, error) {
	escape := func(why string) error {
		return job.Errorf(job.CodePathEscape, "%s %s", p, why).With("path", p)
	}
	switch {
	case p == "":
		return "", escape("is empty")
	case strings.ContainsFunc(p, unicode.IsControl):
		return "", escape("contains a NUL or control byte")
	case slices.Contains(strings.Split(filepath.ToSlash(p), "/"), ".."):
		return "", escape("contains \"..\"")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", escape("cannot be made absolute")
	}
	// As written: under a root named as configured or as resolved.
	var written, resolved []string
	for _, d := range r.Dirs {
		if a, err := filepath.Abs(d); err == nil {
			written = append(written, a)
		}
		if real, err := filepath.EvalSymlinks(d); err == nil {
			written, resolved = append(written, real), append(resolved, real)
		}
	}
	if !underAny(abs, written) {
		return "", escape("is not under a workspace root (serve --workspace-root)")
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if !filepath.IsAbs(p) {
			// A relative path is the server's, not the caller's: say so.
			return "", job.Errorf(job.CodeInvalidRequest, "%s does not exist (a relative path is resolved against the server's working directory: %s)", p, abs).
				With("path", p).With("resolved", abs)
		}
		return "", job.Errorf(job.CodeInvalidRequest, "%s does not exist", p).With("path", p)
	}
	if !underAny(real, resolved) {
		return "", escape("resolves through a symlink to " + real + ", outside the workspace roots")
	}
	for _, ex := range r.Excluded {
		exReal := ex
		if x, err := filepath.EvalSymlinks(ex); err == nil {
			exReal = x
		}
		if under(real, exReal) || under(exReal, real) || under(abs, ex) || under(ex, abs) {
			return "", escape("is in the run store or holds it; no job or task may read the store")
		}
	}
	return real, nil
}

// under reports whether p is dir or lies below it (both absolute, clean).
func under(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func underAny(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return under(p, d) })
}

// dir returns d made absolute once it is known to be a directory.
func dir(d string) (string, error) {
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", &os.PathError{Op: "stat", Path: d, Err: syscall.ENOTDIR}
	}
	return abs, nil
}
