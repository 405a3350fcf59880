package linuxsandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// programDirs are where a view keeps its programs. Under an exec
// allow-list the workload may not even read them, except the allowed
// files: the ELF interpreter, which must stay executable, runs any file it
// can read (ld.so /bin/sh maps the shell without an execve Landlock could
// see), so a program the workload cannot read is one it cannot run.
var programDirs = []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}

// withoutProgramDirs rewrites read-only roots so that none grants the
// program directories: a root holding one is replaced by its entries
// (recursively along the way), the program directories themselves left
// out. Roots are resolved first (/bin is /usr/bin on a merged /usr).
func withoutProgramDirs(roots []string) []string {
	var excluded []string
	for _, d := range programDirs {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			excluded = append(excluded, r)
		}
	}
	var out []string
	for _, root := range roots {
		r, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		out = append(out, expandAround(r, excluded)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// expandAround returns dir itself when it holds no excluded directory,
// nothing when it is one, and otherwise its entries, each expanded the
// same way.
func expandAround(dir string, excluded []string) []string {
	if slices.Contains(excluded, dir) {
		return nil
	}
	holds := false
	for _, x := range excluded {
		if strings.HasPrefix(x, dir+"/") || dir == "/" {
			holds = true
			break
		}
	}
	if !holds {
		return []string{dir}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			// Followed by its target's own entry, if that is a root.
			continue
		}
		out = append(out, expandAround(p, excluded)...)
	}
	return out
}
