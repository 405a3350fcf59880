package runs

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/agent-runner/agent-runner/agent/manifest"
	"github.com/agent-runner/agent-runner/job"
)

// What a manifest reaches on the host, and the rules that hold it:
//
//   - filesystem.read roots are read by the gateway's file tools in the
//     serve process itself, and mounted read-only into the run's sandbox,
//     where its subprocess tools run; filesystem.write roots are mounted
//     writable into it. Each
//     must lie under a workspace root, outside the run store (Roots.Check),
//     exist, and name no symlink beneath its workspace root: what was
//     checked is the directory the gateway opens.
//   - The gateway opens a root by its path, following symlinks, and only
//     beneath it refuses them. A tool call writing in a write root can
//     replace a directory there with a symlink, so no root and no command may lie
//     strictly beneath a write root, of its own run or of another run in
//     progress.
//   - commands.allow are executables run in the run's sandbox under a
//     job's policy decision (the same reach as POST /v1/jobs) and hashed by the compiler in this process, their digest
//     shown in the compiled policy: each must be a regular file that every
//     user may read and execute, so neither a FIFO nor a device can stall
//     the compiler and no private file's digest is disclosed.

// reach is a run's host paths, symlinks resolved.
type reach struct {
	roots  []string // read and write roots
	write  []string
	binary []string // commands
}

// checkCommands refuses commands the compiler must not open (see above).
// Relative or unclean paths are left to manifest.Compile, which refuses
// them without opening anything.
func (s *Service) checkCommands(m *manifest.Manifest) error {
	for i, c := range m.Capabilities.Commands.Allow {
		if !filepath.IsAbs(c) || strings.ContainsRune(c, 0) {
			continue
		}
		fi, err := os.Stat(c)
		switch {
		case err != nil:
			return job.Errorf(job.CodeInvalidRequest, "capabilities.commands.allow: %s cannot be found", c).With("field", "capabilities.commands.allow").With("index", i)
		case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o005 != 0o005:
			return job.Errorf(job.CodeInvalidRequest, "capabilities.commands.allow: %s must be a regular file every user may read and execute", c).
				With("field", "capabilities.commands.allow").With("index", i)
		}
	}
	return nil
}

// reachOf holds p's roots to the workspace roots and returns its reach.
func (s *Service) reachOf(p *manifest.Policy) (reach, error) {
	var r reach
	for _, set := range []struct {
		field string
		paths []string
		write bool
	}{{"capabilities.filesystem.read", p.ReadRoots, false}, {"capabilities.filesystem.write", p.WriteRoots, true}} {
		for i, path := range set.paths {
			real, err := s.hold(path)
			if err != nil {
				je := job.AsError(err)
				return reach{}, job.Errorf(je.Code, "%s: %s", set.field, je.Message).With("field", set.field).With("index", i)
			}
			r.roots = append(r.roots, real)
			if set.write {
				r.write = append(r.write, real)
			}
		}
	}
	for _, c := range p.Commands {
		real, err := filepath.EvalSymlinks(c.Path)
		if err != nil {
			return reach{}, job.Errorf(job.CodeInvalidRequest, "capabilities.commands.allow: %s cannot be found", c.Path)
		}
		r.binary = append(r.binary, real)
	}
	if conflict := nested(r, r); conflict != "" {
		return reach{}, job.Errorf(job.CodePathEscape, "%s", conflict).With("field", "capabilities.filesystem")
	}
	return r, nil
}

// hold checks one root: under a workspace root, out of the store, present,
// and with no symlink between its workspace root and itself.
func (s *Service) hold(path string) (string, error) {
	real, err := s.cfg.Roots.Check(path)
	if err != nil {
		return "", err
	}
	for _, d := range s.cfg.Roots.Dirs {
		dreal, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		for _, base := range []string{d, dreal} {
			if rel, ok := below(path, base); ok && filepath.Join(dreal, rel) == real {
				return real, nil
			}
		}
	}
	return "", job.Errorf(job.CodePathEscape, "%s goes through a symlink (to %s); name the directory itself", path, real).With("path", path)
}

// admit records run id, reaching r, as in progress: within MaxRunning,
// and not nested with another run in progress.
func (s *Service) admit(id string, r reach, info Info) (*active, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.running) >= s.cfg.MaxRunning {
		return nil, job.Errorf(job.CodeQueueFull, "%d agent runs are in progress, the most this server runs at once", s.cfg.MaxRunning)
	}
	for _, o := range s.running {
		if conflict := nested(r, o.reach); conflict != "" {
			return nil, job.Errorf(job.CodePathEscape, "%s of %s", conflict, o.name()).With("field", "capabilities.filesystem")
		}
		if conflict := nested(o.reach, r); conflict != "" {
			return nil, job.Errorf(job.CodePathEscape, "a write root of this manifest holds a path of %s: %s", o.name(), conflict).With("field", "capabilities.filesystem")
		}
	}
	a := &active{info: info, reach: r}
	s.running[id] = a
	return a, nil
}

// name says which run a is in an error.
func (a *active) name() string { return "agent run " + a.info.RunID + " in progress" }

// nested returns why a's roots or commands lie strictly beneath one of
// b's write roots ("" when none does).
func nested(a, b reach) string {
	for _, w := range b.write {
		for _, p := range append(append([]string{}, a.roots...), a.binary...) {
			if rel, ok := below(p, w); ok && rel != "." {
				return p + " lies beneath the write root " + w
			}
		}
	}
	return ""
}

// below returns p relative to dir when p is dir or lies beneath it.
func below(p, dir string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}
