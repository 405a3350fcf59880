package hostcheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// overlayChildArg0 marks this binary re-exec'd as the overlay probe's
// child, inside its new user and mount namespaces.
const overlayChildArg0 = "agent-runner-hostcheck-overlay"

// childHooked is set by MaybeOverlayChild: only then may the probe re-exec
// this binary (any other binary, a test binary above all, would not stop
// at the hook).
var childHooked bool

// MaybeOverlayChild must run before anything else in a binary that probes
// with Local (an init of package main, or TestMain). In the overlay probe's
// child it mounts the overlay and exits; anywhere else it returns at once.
func MaybeOverlayChild() {
	if len(os.Args) == 2 && os.Args[0] == overlayChildArg0 {
		if err := mountOverlayIn(os.Args[1]); err != nil {
			fmt.Fprint(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	childHooked = true
}

// overlayInUserns re-execs this binary in a new user namespace (the
// runner's uid and gid mapped to 0, as an unprivileged linux_sandbox does)
// and a new mount namespace, where it mounts an overlay with userxattr
// (the options linux_sandbox uses) over directories made under dir.
func overlayInUserns(ctx context.Context, dir string) error {
	if !childHooked {
		return fmt.Errorf("%w: the overlay child is not hooked into this binary (hostcheck.MaybeOverlayChild)", errNotProbed)
	}
	tmp, err := os.MkdirTemp(dir, ".agent-runner-doctor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "lower", "file"), []byte("lower\n"), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = []string{overlayChildArg0, tmp}
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return errors.New(msg)
		}
		return fmt.Errorf("cannot start the probe in a new user namespace: %w", err)
	}
	return nil
}

// mountOverlayIn runs in the child: it mounts dir/merged and copies up the
// lower file by appending to it. Relative paths keep the options free of
// the commas and colons dir may hold.
func mountOverlayIn(dir string) error {
	if err := os.Chdir(dir); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount("overlay", "merged", "overlay", 0, "lowerdir=lower,upperdir=upper,workdir=work,userxattr"); err != nil {
		return fmt.Errorf("mount overlay: %w", err)
	}
	f, err := os.OpenFile("merged/file", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("copy-up: %w", err)
	}
	if _, err := f.WriteString("upper\n"); err != nil {
		f.Close()
		return fmt.Errorf("copy-up: %w", err)
	}
	return f.Close()
}
