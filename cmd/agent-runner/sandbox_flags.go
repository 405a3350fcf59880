package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
)

// sandboxFlags are the operator's part of the sandbox view, on run,
// serve, worker and task shell (docs/backends.md): extra host directories
// every sandbox sees read-only, and the sandbox's PATH, on which bare
// program names of jobs and tasks resolve, inside the view only.
type sandboxFlags struct {
	readOnly []string
	path     string
	// allowUnenforced is --allow-unenforced-limits
	// (backend.Config.AllowUnenforcedLimits).
	allowUnenforced bool
}

// allowUnenforcedFlag and its help: limits fail closed unless the operator
// says otherwise (docs/backends.md).
const (
	allowUnenforcedFlag = "allow-unenforced-limits"
	allowUnenforcedHelp = "run jobs whose memory_mb, cpu_count or max_processes the backend cannot apply here (no usable cgroup), reporting them not_enforced in every result; without it such jobs end backend.unavailable and linux_sandbox is unavailable on a host that gives it no cgroup"
)

func (f *sandboxFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.readOnly, "sandbox-ro", nil, "host directory bound read-only at the same path into every linux_sandbox sandbox (a version manager's prefix such as /root/.nvm or /root/.pyenv, a global node_modules); repeatable; it must exist and be readable by the sandbox's uid")
	fs.BoolVar(&f.allowUnenforced, allowUnenforcedFlag, false, allowUnenforcedHelp)
	fs.StringVar(&f.path, "sandbox-path", strings.Join(linuxsandbox.DefaultPath, ":"), "the linux_sandbox sandbox's PATH: bare program names of jobs and tasks resolve on it, to programs inside the sandbox view only")
}

// backends builds every backend of this binary with the operator's view
// (backend.NewSet), once, before anything runs: the doors hand the Set to
// the runner and the task lifecycle. A read-only directory holding the
// store would show every sandbox all the runs, so it is refused.
func (f *sandboxFlags) backends(storeDir string) (backend.Set, error) {
	var path []string
	for _, d := range filepath.SplitList(f.path) {
		if d != "" {
			path = append(path, d)
		}
	}
	set, err := backend.NewSet(backend.Config{ReadOnly: f.readOnly, Path: path, AllowUnenforcedLimits: f.allowUnenforced})
	if err != nil {
		return nil, usageError{err}
	}
	store, err := filepath.Abs(storeDir)
	if err != nil {
		return nil, usageError{err}
	}
	if real, err := filepath.EvalSymlinks(store); err == nil {
		store = real
	}
	for _, d := range f.readOnly {
		real, _ := filepath.EvalSymlinks(d)
		if store == real || strings.HasPrefix(store, real+"/") {
			return nil, usageError{fmt.Errorf("--sandbox-ro %s: the store %s lies inside it, so every sandbox would see every run", d, store)}
		}
	}
	return set, nil
}
