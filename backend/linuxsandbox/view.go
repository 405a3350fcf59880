package linuxsandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// DefaultPath is the sandbox's PATH unless the operator sets one.
var DefaultPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// New returns a linux_sandbox backend whose sandboxes see the host
// toolchain and cfg.ReadOnly read-only, with DefaultMasked and cfg.Masked
// hidden, and cfg.Path (else DefaultPath) as PATH. A read-only directory
// must exist, be a directory the sandbox's uid can read, and not be one
// of the places the sandbox mounts itself; it is bound at its real path
// (links resolved), so a link into it keeps working inside. A masked path
// must be absolute. The view is the instance's own: instances with
// different views run side by side in one process.
func New(cfg backend.Config) (*Backend, error) {
	ro := make([]string, 0, len(cfg.ReadOnly))
	for _, d := range cfg.ReadOnly {
		real, err := readOnlyDir(d)
		if err != nil {
			return nil, job.Wrap(job.CodeBackendSetupFailed, err, backend.ReadOnlyFlag+" "+d)
		}
		ro = append(ro, real)
	}
	path := DefaultPath
	if len(cfg.Path) > 0 {
		path = slices.Clone(cfg.Path)
	}
	for _, d := range path {
		if !filepath.IsAbs(d) {
			return nil, job.Errorf(job.CodeBackendSetupFailed, "%s %s: %q is not an absolute directory", backend.PathFlag, strings.Join(cfg.Path, ":"), d)
		}
	}
	masked := slices.Clone(DefaultMasked)
	for _, m := range cfg.Masked {
		if !filepath.IsAbs(m) {
			return nil, job.Errorf(job.CodeBackendSetupFailed, "masked path %q is not absolute", m)
		}
		masked = append(masked, filepath.Clean(m))
	}
	return &Backend{
		toolchain:       slices.Clone(DefaultToolchain),
		masked:          masked,
		readOnly:        ro,
		path:            path,
		requireLimits:   cfg.RequireLimits,
		allowUnenforced: cfg.AllowUnenforcedLimits,
	}, nil
}

// reserved are sandbox paths a read-only directory may not be or lie
// under: the sandbox's own mounts.
var reserved = []string{"/proc", "/dev", WorkspaceMount, egressDir}

func readOnlyDir(d string) (string, error) {
	if !filepath.IsAbs(d) {
		return "", fmt.Errorf("not an absolute path")
	}
	real, err := filepath.EvalSymlinks(d)
	if err != nil {
		return "", fmt.Errorf("does not exist: %w", err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", real)
	}
	if real == "/" || real == "/tmp" {
		return "", fmt.Errorf("%s would replace the sandbox's own %s", real, real)
	}
	for _, r := range reserved {
		if real == r || strings.HasPrefix(real, r+"/") {
			return "", fmt.Errorf("%s lies in the sandbox's own %s", real, r)
		}
	}
	// A root runner's sandboxes run as uids of their own ("others" to
	// the directory); an unprivileged runner's as its own uid. The
	// directory's ancestors do not matter: its mount is passed to the
	// sandbox as a descriptor.
	if os.Getuid() == 0 {
		if fi.Mode().Perm()&0o005 != 0o005 {
			return "", fmt.Errorf("%s (mode %04o) cannot be read by the sandbox's uid: it needs o+rx", real, fi.Mode().Perm())
		}
	} else if err := unix.Access(real, unix.R_OK|unix.X_OK); err != nil {
		return "", fmt.Errorf("%s cannot be read by this user: %w", real, err)
	}
	return real, nil
}

// View implements backend.Viewer: the toolchain and the operator's
// read-only directories, the masked secrets, and the sandbox's PATH.
func (b *Backend) View() backend.View {
	roots := append(slices.Clone(b.toolchain), b.readOnly...)
	return backend.View{Roots: roots, Masked: slices.Clone(b.masked), Path: slices.Clone(b.path)}
}

var _ backend.Viewer = (*Backend)(nil)
