package linuxsandbox

import (
	"bytes"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// execJudge decides, as the kernel will, whether an exec is refused: its
// file, or the #! interpreter of a script, is a denied program
// (DeniedPrograms) or is off the allow-list (Executables and their ELF
// interpreters).
type execJudge struct {
	// deny are the denied files; allow, when non-nil, the only files
	// that run.
	deny  map[fileID]string
	allow map[fileID]bool
	// plain are files judged to run that are no script, by identity (so
	// a rewritten file is judged anew): a program executed again is not
	// read again. Only the recorder's goroutine uses it.
	plain map[backend.FileIdentity]bool
}

// maxPlain bounds execJudge.plain.
const maxPlain = 4096

// newExecJudge resolves cfg's lists in the sandbox's view.
func newExecJudge(cfg initConfig) execJudge {
	j := execJudge{plain: map[backend.FileIdentity]bool{}}
	if cfg.DeniedPrograms != nil {
		j.deny = deniedFiles(cfg.DeniedPrograms, denyDirs(cfg.SearchPath)).ids
	}
	if cfg.Executables != nil {
		j.allow = map[fileID]bool{}
		for _, p := range cfg.Executables {
			files := []string{p}
			if interp, err := elfInterpreter(p); err == nil && interp != "" {
				files = append(files, interp)
			}
			for _, f := range files {
				var st unix.Stat_t
				if unix.Stat(f, &st) == nil {
					j.allow[idOf(&st)] = true
				}
			}
		}
	}
	return j
}

// maxScriptDepth is how many #! interpreters deep the judge follows, as
// the kernel (BINPRM_MAX_RECURSION).
const maxScriptDepth = 4

// denied reports whether executing path is refused, and the #!
// interpreter that is, when path itself is not. A path that does not
// exist fails with ENOENT, not a denial.
func (j execJudge) denied(path string) (interp string, refused bool) {
	p := path
	for range maxScriptDepth + 1 {
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil {
			return "", false
		}
		if j.refuses(idOf(&st)) {
			if p == path {
				return "", true
			}
			return p, true
		}
		id := fileIdentity(&st)
		if j.plain[id] {
			return "", false
		}
		next := shebang(p)
		if next == "" {
			if p == path && j.plain != nil && len(j.plain) < maxPlain {
				j.plain[id] = true
			}
			return "", false
		}
		p = next
	}
	return "", false
}

func (j execJudge) refuses(id fileID) bool {
	if _, ok := j.deny[id]; ok {
		return true
	}
	return j.allow != nil && !j.allow[id]
}

// shebang returns the absolute #! interpreter of the regular file at
// path, "" for anything else; it never blocks (a FIFO is not opened for
// reading).
func shebang(path string) string {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return ""
	}
	buf := make([]byte, 256)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil || n < 2 {
		return ""
	}
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	rest, ok := bytes.CutPrefix(line, []byte("#!"))
	if !ok {
		return ""
	}
	fields := bytes.Fields(rest)
	if len(fields) == 0 || !filepath.IsAbs(string(fields[0])) {
		return ""
	}
	return string(fields[0])
}

// groupDenial is a denial with the process group of its caller, which
// names the exec of a kept sandbox it belongs to.
type groupDenial struct {
	job.ExecDenial
	pgid int
}

// maxDenialGroups bounds how many process groups the recorder keeps
// denials for; the rest are kept under group 0.
const maxDenialGroups = 1024

// execRecorder keeps the denials the init saw, per process group, the
// first job.MaxExecDenials of each and a count of all.
type execRecorder struct {
	judge execJudge

	mu     sync.Mutex
	groups map[int]*denials
}

type denials struct {
	list  []groupDenial
	total int
}

func newExecRecorder(j execJudge) *execRecorder {
	return &execRecorder{judge: j, groups: map[int]*denials{}}
}

func (r *execRecorder) record(d groupDenial) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.groups[d.pgid]
	if !ok && len(r.groups) >= maxDenialGroups {
		g, ok = r.groups[0], r.groups[0] != nil
	}
	if !ok {
		g = &denials{}
		r.groups[d.pgid] = g
	}
	g.total++
	if len(g.list) < job.MaxExecDenials {
		g.list = append(g.list, d)
	}
}

// take removes and returns the denials of process group pgid, or of
// every group when pgid is negative, in time order, the first
// job.MaxExecDenials, and how many there were. A nil recorder has none.
func (r *execRecorder) take(pgid int) ([]job.ExecDenial, int) {
	if r == nil {
		return nil, 0
	}
	r.mu.Lock()
	var all []groupDenial
	total := 0
	for g, d := range r.groups {
		if pgid >= 0 && g != pgid {
			continue
		}
		all, total = append(all, d.list...), total+d.total
		delete(r.groups, g)
	}
	r.mu.Unlock()
	slices.SortStableFunc(all, func(a, b groupDenial) int { return a.Time.Compare(b.Time) })
	var out []job.ExecDenial
	for _, d := range all[:min(len(all), job.MaxExecDenials)] {
		out = append(out, d.ExecDenial)
	}
	return out, total
}
