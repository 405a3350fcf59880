package hostcheck

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Local is this machine as the runner sees it.
func Local() Host {
	return Host{
		UID:             os.Getuid(),
		Arch:            runtime.GOARCH,
		LandlockABI:     llsys.LandlockGetABIVersion,
		LookPath:        exec.LookPath,
		Version:         toolVersion,
		OverlayInUserns: overlayInUserns,
	}
}

// toolVersion runs `path --version` (5 s at most) and returns its first
// non-empty line.
func toolVersion(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			return line, err
		}
	}
	if err == nil {
		err = errors.New("no version printed")
	}
	return "", err
}

// path is an absolute host path under h.Root.
func (h Host) path(p string) string { return filepath.Join(h.Root, p) }

// read returns the content of an absolute host path under h.Root, or ""
// when it cannot be read.
func (h Host) read(p string) string {
	b, err := os.ReadFile(h.path(p))
	if err != nil {
		return ""
	}
	return string(b)
}

// sysctl reads /proc/sys/<name with dots as slashes>; ok is false when the
// file is absent or unreadable.
func (h Host) sysctl(name string) (string, bool) {
	b, err := os.ReadFile(h.path("/proc/sys/" + strings.ReplaceAll(name, ".", "/")))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// absPath is p made absolute, or p when that fails.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
