package linuxsandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Denied programs (backend.Spec.DeniedPrograms: policy.allow_shell false)
// are files no process in the sandbox may execute, or even read, whatever
// the exec scope. Landlock only grants, so restrictLandlock grants around
// them: the init finds them in the view's program directories by name
// (deniedFiles; links followed to the real files, which are known by
// device and inode), and every read-only or writable root that holds one
// of them is granted entry by entry down to them (grantAround): a
// directory that holds none is granted whole, a file is granted unless
// it is a denied file under any name (a hard link in the same
// directory), symbolic links are skipped (what they name is granted
// where it lies). A denied file is then neither executable (execve, a script's #!
// interpreter, the ELF interpreter of another program) nor readable, so
// it cannot be copied to a writable place or run through the ELF
// interpreter (ld.so /bin/sh) either.
//
// What stays open under exec_scope argv0: a shell the job brings itself
// (in its snapshot, or written byte by byte) runs from the workspace or
// /tmp, which stay executable there (builds run what they compile);
// exec_scope every_process closes that too (execallow.go: noexec).

// fileID names a file by device and inode.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), st.Ino} }

// deniedSet is what the workload may not execute: the denied files, by
// identity and by real path.
type deniedSet struct {
	ids   map[fileID]string
	paths []string
}

// deniedFiles finds names in dirs (the view's program directories and
// the workload's PATH), following links to the real files.
func deniedFiles(names, dirs []string) deniedSet {
	d := deniedSet{ids: map[fileID]string{}}
	for _, dir := range dirs {
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			continue
		}
		for _, n := range names {
			p, err := filepath.EvalSymlinks(filepath.Join(real, n))
			if err != nil {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			d.ids[idOf(&st)] = p
			d.paths = append(d.paths, p)
		}
	}
	slices.Sort(d.paths)
	d.paths = slices.Compact(d.paths)
	return d
}

// denyDirs are where deniedFiles looks: the program directories, and
// the absolute directories of search.
func denyDirs(search []string) []string {
	dirs := slices.Clone(programDirs)
	for _, d := range search {
		if filepath.IsAbs(d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// searchPath is the PATH of env, split.
func searchPath(env []string) []string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			return filepath.SplitList(v)
		}
	}
	return nil
}

// holds reports whether dir must be granted entry by entry: a denied
// file lies at or below it.
func (d deniedSet) holds(dir string) bool {
	for _, p := range d.paths {
		if p == dir || dir == "/" || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// grants is a root split around the denied files: dirs granted whole,
// files granted one by one, and listed, the directories walked down
// (granted listing and the rights that are not a file's).
type grants struct{ dirs, files, listed []string }

// grantAround splits root (resolved) around d.
func (d deniedSet) grantAround(root string, g *grants) {
	if !d.holds(root) {
		g.dirs = append(g.dirs, root)
		return
	}
	var st unix.Stat_t
	if unix.Stat(root, &st) != nil {
		return
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if _, denied := d.ids[idOf(&st)]; !denied {
			g.files = append(g.files, root)
		}
		return
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	g.listed = append(g.listed, root)
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			continue
		}
		p := filepath.Join(root, e.Name())
		if e.IsDir() {
			d.grantAround(p, g)
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			continue
		}
		if _, denied := d.ids[idOf(&st)]; !denied {
			g.files = append(g.files, p)
		}
	}
}

// fileRights are the rights Landlock accepts on a file rather than a
// directory.
const fileRights = landlock.AccessFSSet(llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSWriteFile | llsys.AccessFSTruncate)

// rulesAround grants rights on roots but the denied files. Roots are
// resolved first, and one below another is left to it (/bin is /usr/bin
// on a merged /usr, granted with /usr).
func (d deniedSet) rulesAround(rights landlock.AccessFSSet, roots []string) []pathRule {
	var g grants
	for _, r := range outermost(roots) {
		d.grantAround(r, &g)
	}
	return []pathRule{{access: rights, paths: g.dirs}, {access: rights & fileRights, paths: g.files}, {access: rights &^ fileRights, paths: g.listed}}
}

// shellDenyAvailable refuses denied programs on a kernel without
// Landlock, where only the command line would be checked, unless the
// operator runs with unenforced limits (allowUnenforced): then the job
// runs and lists job.LimitShells as not enforced.
func shellDenyAvailable(spec backend.Spec, allowUnenforced bool) error {
	return shellDenyOn(landlockABI(), spec, allowUnenforced)
}

// shellDenyOn is shellDenyAvailable on a kernel of Landlock ABI abi.
func shellDenyOn(abi int, spec backend.Spec, allowUnenforced bool) error {
	if spec.DeniedPrograms == nil || abi > 0 || allowUnenforced {
		return nil
	}
	return job.Errorf(job.CodeBackendUnavail, "linux_sandbox cannot keep every process of the job from executing a shell (policy.allow_shell false): this kernel has no Landlock; set allow_shell, or run with --allow-unenforced-limits to check the command line only").
		With("reason", "landlock unavailable").With("not_enforced", []string{job.LimitShells})
}

// shellWall adds job.LimitShells to out for a Spec that denies programs.
func shellWall(out backend.Outcome, spec backend.Spec) backend.Outcome {
	switch {
	case spec.DeniedPrograms == nil:
	case spec.Image != nil:
		// Only with --allow-unenforced-limits (checkImage): the
		// command line alone was checked.
		out.NotEnforced = append(out.NotEnforced, job.LimitShells)
	case landlockABI() > 0:
		out.Enforced = append(out.Enforced, job.LimitShells)
	default:
		out.NotEnforced = append(out.NotEnforced, job.LimitShells)
	}
	return out
}

// outermost resolves roots and keeps those no other lies above.
func outermost(roots []string) []string {
	var real []string
	for _, r := range roots {
		if p, err := filepath.EvalSymlinks(r); err == nil {
			real = append(real, p)
		}
	}
	slices.Sort(real)
	var out []string
	for _, p := range slices.Compact(real) {
		if len(out) > 0 && (out[len(out)-1] == "/" || strings.HasPrefix(p, out[len(out)-1]+"/")) {
			continue
		}
		out = append(out, p)
	}
	return out
}
