package hostcheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// filesystems reports overlayfs (snapshot_strategy overlay), loop devices
// (task vm.disk) and KVM. overlayDir is where the user-namespace overlay
// mount is tried (the store's filesystem when it exists).
func (h Host) filesystems(ctx context.Context, overlayDir string) []Check {
	checks := h.overlayChecks(ctx, overlayDir)
	checks = append(checks, h.loopCheck(), h.kvmCheck())
	for i := range checks {
		checks[i].Section = SectionFS
	}
	return checks
}

func (h Host) overlayChecks(ctx context.Context, dir string) []Check {
	var fss []string
	for _, line := range strings.Split(h.read("/proc/filesystems"), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			fss = append(fss, f[len(f)-1])
		}
	}
	if !slices.Contains(fss, "overlay") {
		return []Check{
			{Name: "overlayfs", Status: StatusWarn, Found: "overlay is not in /proc/filesystems: workspace.snapshot_strategy overlay fails (copy works)",
				Fix: "modprobe overlay, and persist it: echo overlay > /etc/modules-load.d/overlay.conf"},
			{Name: "overlayfs_userns", Status: StatusWarn, Found: "not tried: no overlayfs", Fix: "make overlayfs available first (see overlayfs)"},
		}
	}
	checks := []Check{{Name: "overlayfs", Status: StatusOK, Found: "overlay is in /proc/filesystems"}}
	u := Check{Name: "overlayfs_userns"}
	switch err := h.overlayInUserns(ctx, dir); {
	case err == nil:
		u.Status, u.Found = StatusOK, "an overlay (userxattr) mounts inside a new user namespace (tried under "+dir+")"
	case errors.Is(err, errNotProbed):
		u.Status, u.Found = StatusInfo, err.Error()
	default:
		u.Status = StatusWarn
		u.Found = "an overlay cannot be mounted inside a user namespace (tried under " + dir + "): " + err.Error() + "; workspace.snapshot_strategy overlay fails (copy works)"
		u.Fix = "boot a kernel 5.11 or later (overlayfs in user namespaces, userxattr), and keep the store on a filesystem with user xattrs (ext4, xfs, btrfs; tmpfs from 6.6)"
	}
	return append(checks, u)
}

// errNotProbed marks a probe this Host cannot run.
var errNotProbed = errors.New("not probed")

func (h Host) overlayInUserns(ctx context.Context, dir string) error {
	if h.OverlayInUserns == nil {
		return fmt.Errorf("%w: no user-namespace mount probe configured", errNotProbed)
	}
	return h.OverlayInUserns(ctx, dir)
}

// loopCheck: task vm.disk loop-mounts a sparse image, which needs root and
// /dev/loop-control.
func (h Host) loopCheck() Check {
	c := Check{Name: "loop_devices"}
	f, err := os.OpenFile(h.path("/dev/loop-control"), os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		c.Status, c.Found = StatusWarn, "/dev/loop-control is absent: task vm.disk (a loop-mounted disk image) cannot be enforced"
		c.Fix = "modprobe loop, and persist it: echo loop > /etc/modules-load.d/loop.conf (in a container: pass /dev/loop-control and /dev/loop*)"
	case err != nil:
		c.Status, c.Found = StatusWarn, fmt.Sprintf("/dev/loop-control cannot be opened (%v): task vm.disk cannot be enforced", unwrapPath(err))
		c.Fix = "run agent-runner as root for tasks with vm.disk"
	case h.UID != 0:
		f.Close()
		c.Status, c.Found = StatusWarn, "/dev/loop-control opens, but task vm.disk loop-mounts need root"
		c.Fix = "run agent-runner as root for tasks with vm.disk"
	default:
		f.Close()
		c.Status, c.Found = StatusOK, "/dev/loop-control opens: task vm.disk can be enforced"
	}
	return c
}

// kvmCheck is informational: no backend in this build uses KVM.
func (h Host) kvmCheck() Check {
	c := Check{Name: "kvm", Status: StatusInfo}
	f, err := os.OpenFile(h.path("/dev/kvm"), os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		c.Found = "/dev/kvm is absent (no backend in this build needs it)"
	case err != nil:
		c.Found = fmt.Sprintf("/dev/kvm exists but cannot be opened: %v (no backend in this build needs it)", unwrapPath(err))
	default:
		f.Close()
		c.Found = "/dev/kvm opens (no backend in this build uses it)"
	}
	return c
}

// runtimeUse says what the oci backend enforces with each OCI runtime.
var runtimeUse = map[string]string{
	"runc": "; the oci backend's runtime runc: namespaces, a user namespace on a host id range of its own (root inside), " +
		"linux_sandbox's seccomp allow-list, no_new_privileges, cgroup memory/pids/cpu checked after create, an idmapped overlay root, " +
		"network none or the egress bridge",
	"runsc": "; the oci backend's runtime runsc (gVisor, platform ptrace): its own kernel between workload and host, " +
		"network none (no egress bridge), the root under gVisor's memory overlay, cgroup memory/pids/cpu on the whole sandbox",
}

// tools reports the other sandbox runtimes on PATH: runc and runsc are
// the oci backend's (with what it enforces through each), bwrap is
// listed for comparison.
func (h Host) tools(ctx context.Context) []Check {
	var checks []Check
	for _, name := range []string{"runc", "runsc", "bwrap"} {
		c := Check{Section: SectionTools, Name: name, Status: StatusInfo}
		p, err := "", errNotProbed
		if h.LookPath != nil {
			p, err = h.LookPath(name)
		}
		switch {
		case err != nil:
			c.Found = "not on PATH"
		case h.Version == nil:
			c.Found = p
		default:
			v, verr := h.Version(ctx, p)
			if v == "" && verr != nil {
				v = "version unknown: " + verr.Error()
			}
			c.Found = p + ", " + v + runtimeUse[name]
		}
		checks = append(checks, c)
	}
	return checks
}

// overlayDir is where the overlay probe works: the store, where
// linux_sandbox keeps overlay layers, when it exists; else the temp dir.
func overlayDir(store string) string {
	if fi, err := os.Stat(store); err == nil && fi.IsDir() {
		return absPath(store)
	}
	return os.TempDir()
}
