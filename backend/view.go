package backend

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Viewer is implemented by a backend whose workload sees only part of the
// host's filesystem (linux_sandbox). Whoever resolves a program for such a
// backend (policy for jobs, the task runner for agents, `task shell`) asks
// for its View and resolves inside it, never on its own PATH: a program
// the server finds first (a pyenv shim, a version manager's directory)
// may not exist inside the sandbox at all.
type Viewer interface {
	View() View
}

// View is what every sandbox of a backend sees of the host, at the same
// paths, besides its job's own directories.
type View struct {
	// Roots are the host directories visible read-only: the toolchain and
	// the operator's extra directories (--sandbox-ro).
	Roots []string
	// Masked are paths inside Roots that are hidden.
	Masked []string
	// Path is the sandbox's PATH, searched for bare program names.
	Path []string
	// Root, when set, is the directory every path of the view lies in:
	// an image's root file system (ImageView). Paths are then the
	// sandbox's own, resolved inside Root (links too), never on the host.
	Root string
}

// ReadOnlyFlag and PathFlag are the operator's flags that widen a View;
// messages about a program outside the view name them.
const (
	ReadOnlyFlag = "--sandbox-ro"
	PathFlag     = "--sandbox-path"
)

// Visible reports whether the host path p is inside the view: p itself
// and, when it is a symbolic link, its target both lie under a root and
// are not masked.
func (v View) Visible(p string) bool {
	if !filepath.IsAbs(p) {
		return false
	}
	if !v.within(filepath.Clean(p)) {
		return false
	}
	if v.Root != "" {
		_, err := statIn(v.Root, p)
		return err == nil
	}
	real, err := filepath.EvalSymlinks(p)
	return err == nil && v.within(real)
}

func (v View) within(p string) bool {
	for _, m := range v.Masked {
		if under(p, m) {
			return false
		}
	}
	for _, r := range v.Roots {
		if under(p, r) {
			return true
		}
	}
	return false
}

// under reports whether p is dir or lies below it (both clean).
func under(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// LookPath finds name (a bare program name) on the view's Path: the first
// executable regular file that is Visible, as the sandbox's own PATH
// search would find it. It returns "" when there is none.
func (v View) LookPath(name string) string {
	for _, dir := range v.Path {
		p := filepath.Join(dir, name)
		if v.Root != "" {
			if st, err := statIn(v.Root, p); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0 && v.within(p) {
				return p
			}
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 && v.Visible(p) {
			return p
		}
	}
	return ""
}

// String lists the roots, space-separated, for messages.
func (v View) String() string { return strings.Join(v.Roots, " ") }

// Explain says why the host program exe, which a bare name (bare) or
// an absolute path named, cannot run in the view, and what the operator
// can do: the directories to add with ReadOnlyFlag (the program's prefix,
// and its link target's when that lies elsewhere), and its directory for
// PathFlag when a bare name has to find it there.
func (v View) Explain(exe string, bare bool) string {
	dir := filepath.Dir(exe)
	onPath := !bare || slices.Contains(v.Path, dir)
	if v.Root != "" {
		if v.Visible(exe) {
			return exe + " is in the image but " + dir + " is not on its PATH (" + strings.Join(v.Path, ":") + "); name the program by its absolute path"
		}
		return exe + " is not in the image"
	}
	if v.Visible(exe) {
		return exe + " is in the sandbox view but " + dir + " is not on its PATH (" + strings.Join(v.Path, ":") + "); put it on " + PathFlag + " or name the program by its absolute path"
	}
	var add []string
	if !v.within(filepath.Clean(exe)) {
		add = append(add, prefix(filepath.Clean(exe)))
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil && !v.within(real) && (len(add) == 0 || !under(real, add[0])) {
		add = append(add, prefix(real))
	}
	msg := exe + " is outside the sandbox view (" + v.String() + ")"
	if len(add) > 0 {
		msg += "; add " + ReadOnlyFlag + " " + strings.Join(add, " "+ReadOnlyFlag+" ")
	}
	if !onPath {
		msg += " and put " + dir + " on " + PathFlag
	}
	return msg
}

// prefix is the directory an operator would add for a program: the
// install prefix above a bin, sbin or shims directory, else the
// program's own directory.
func prefix(exe string) string {
	dir := filepath.Dir(exe)
	switch filepath.Base(dir) {
	case "bin", "sbin", "shims":
		return filepath.Dir(dir)
	}
	return dir
}
