package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
)

// sandboxFlags are the operator's part of the linux_sandbox view, on run,
// serve, worker and task shell (docs/backends.md): extra host directories
// every sandbox sees read-only, and the sandbox's PATH, on which bare
// program names of jobs and tasks resolve, inside the view only.
type sandboxFlags struct {
	readOnly []string
	path     string
}

func (f *sandboxFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.readOnly, "sandbox-ro", nil, "host directory bound read-only at the same path into every linux_sandbox sandbox (a version manager's prefix such as /root/.nvm or /root/.pyenv, a global node_modules); repeatable; it must exist and be readable by the sandbox's uid")
	fs.StringVar(&f.path, "sandbox-path", strings.Join(linuxsandbox.DefaultPath, ":"), "the linux_sandbox sandbox's PATH: bare program names of jobs and tasks resolve on it, to programs inside the sandbox view only")
}

// apply configures the linux_sandbox backend before anything runs. A read
// -only directory holding the store would show every sandbox all the
// runs, so it is refused.
func (f *sandboxFlags) apply(storeDir string) error {
	var path []string
	for _, d := range filepath.SplitList(f.path) {
		if d != "" {
			path = append(path, d)
		}
	}
	if err := linuxsandbox.Configure(linuxsandbox.ViewConfig{ReadOnly: f.readOnly, Path: path}); err != nil {
		return usageError{err}
	}
	store, err := filepath.Abs(storeDir)
	if err != nil {
		return usageError{err}
	}
	if real, err := filepath.EvalSymlinks(store); err == nil {
		store = real
	}
	for _, d := range f.readOnly {
		real, _ := filepath.EvalSymlinks(d)
		if store == real || strings.HasPrefix(store, real+"/") {
			return usageError{fmt.Errorf("--sandbox-ro %s: the store %s lies inside it, so every sandbox would see every run", d, store)}
		}
	}
	return nil
}
