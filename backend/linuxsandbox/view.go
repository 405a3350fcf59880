package linuxsandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
)

// DefaultPath is the sandbox's PATH unless the operator sets one.
var DefaultPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// ViewConfig is the operator's part of the sandbox view (the doors'
// --sandbox-ro and --sandbox-path flags).
type ViewConfig struct {
	// ReadOnly are host directories bound read-only at the same path into
	// every sandbox, beside the toolchain (a version manager's prefix,
	// a global node_modules).
	ReadOnly []string
	// Path is the sandbox's PATH; empty takes DefaultPath.
	Path []string
}

// registered is the instance this package registers.
var registered = New()

// Configure sets the view of the linux_sandbox backend registered in this
// binary; the doors call it once at start, before any job. Backends are
// registered as instances, so the operator's settings reach this one
// through a function of its own package: only this backend has a view to
// configure. (When registration takes factories, ViewConfig becomes the
// factory's argument and this function goes.)
func Configure(c ViewConfig) error { return registered.Configure(c) }

// Configure checks c and makes it b's view. A read-only directory must
// exist, be a directory the sandbox's uid can read, and not be one of the
// places the sandbox mounts itself; it is bound at its real path (links
// resolved), so a link into it keeps working inside.
func (b *Backend) Configure(c ViewConfig) error {
	ro := make([]string, 0, len(c.ReadOnly))
	for _, d := range c.ReadOnly {
		real, err := readOnlyDir(d)
		if err != nil {
			return fmt.Errorf("%s %s: %w", backend.ReadOnlyFlag, d, err)
		}
		ro = append(ro, real)
	}
	path := DefaultPath
	if len(c.Path) > 0 {
		path = c.Path
	}
	for _, d := range path {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("%s %s: %q is not an absolute directory", backend.PathFlag, strings.Join(c.Path, ":"), d)
		}
	}
	b.viewMu.Lock()
	defer b.viewMu.Unlock()
	b.ReadOnly, b.Path = ro, path
	return nil
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
	b.viewMu.RLock()
	defer b.viewMu.RUnlock()
	path := b.Path
	if len(path) == 0 {
		path = DefaultPath
	}
	roots := append(append([]string{}, b.Toolchain...), b.ReadOnly...)
	return backend.View{Roots: roots, Masked: b.Masked, Path: path}
}

// operatorView is what Run binds besides the job's own directories.
func (b *Backend) operatorView() (toolchain, masked, readOnly []string) {
	b.viewMu.RLock()
	defer b.viewMu.RUnlock()
	return b.Toolchain, b.Masked, b.ReadOnly
}

var _ backend.Viewer = (*Backend)(nil)
