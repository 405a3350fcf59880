package agentstep

import (
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/manifest"
)

// defaultPath is PATH on a backend without a view (the host's programs).
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// SearchPath is the PATH a task's processes get on b: its sandbox's
// (backend.Viewer), else defaultPath.
func SearchPath(b backend.Backend) string {
	if v, ok := b.(backend.Viewer); ok {
		return strings.Join(v.View().Path, ":")
	}
	return defaultPath
}

// Resolve finds the program name (argv[0] of a `task shell`, whose flags
// these are) as b will run it; see resolve.
func Resolve(b backend.Backend, name string) (string, error) {
	return resolve(b, name, "program", "task shell")
}

// resolve finds the program name (a task's argv[0]) as b will run it. On
// a backend with a view (linux_sandbox) a bare name is looked up on the
// sandbox's PATH, and only a program inside the view is found: serve's
// own PATH, where a pyenv shim or a version manager's directory may come
// first, is never used. Outside the view it is validation.invalid_request
// (field agent.command), naming the directory to add with --sandbox-ro.
// Elsewhere (local_process runs on the host) a bare name is looked up on
// this process's PATH. A relative path with a slash names a program in the
// workspace and is kept. Messages call it label, and name the flags of
// door.
func resolve(b backend.Backend, name, label, door string) (string, error) {
	if strings.Contains(name, "/") && !filepath.IsAbs(name) {
		return name, nil
	}
	v, ok := b.(backend.Viewer)
	if !ok {
		if filepath.IsAbs(name) {
			return name, nil
		}
		p, err := exec.LookPath(name)
		if err != nil {
			return "", job.Errorf(job.CodeRunSpawnFailed, "%s %q not found on the runner's PATH", label, name)
		}
		return p, nil
	}
	view := v.View()
	deny := func(format string, args ...any) error {
		return job.Errorf(job.CodeInvalidRequest, format, args...).With("field", "agent.command").With("argv0", name)
	}
	if filepath.IsAbs(name) {
		if !view.Visible(name) {
			return "", deny("%s %q: %s, flags of %s", label, name, view.Explain(name, false), door)
		}
		return name, nil
	}
	if p := view.LookPath(name); p != "" {
		return p, nil
	}
	if host, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(host); err == nil {
			host = abs
		}
		return "", deny("%s %q: %s, flags of %s", label, name, view.Explain(host, true), door)
	}
	return "", deny("%s %q: not found on the sandbox PATH (%s) nor on this host", label, name, strings.Join(view.Path, ":"))
}

// Check is lifecycle.Admit's test of a task's agent command on b, at
// submit and again before the clone: on a backend with a view the
// program must be one its sandbox can run (see Resolve). Other backends
// look it up when the agent starts.
func Check(b backend.Backend, t *manifest.Task) error {
	if _, ok := b.(backend.Viewer); !ok {
		return nil
	}
	_, err := resolveAgent(b, t)
	return err
}

// resolveAgent resolves the task's agent command on b.
func resolveAgent(b backend.Backend, t *manifest.Task) (string, error) {
	return resolve(b, Command(t)[0], "agent command", "serve")
}
