// Package oci is the oci backend: sandboxes from an image (Spec.Image),
// run by an OCI runtime binary on a bundle generated for each sandbox —
// runc (namespaces, seccomp and cgroups of the host kernel) or gVisor's
// runsc (its own user-space kernel between the workload and the host).
//
// A sandbox is a container whose init is a tiny program of ours that
// only reaps orphans (init.go); Create is `create` and `start` of it,
// every Start is an `exec` of one process, Pause and Resume are the
// runtime's `pause` and `resume` (the freezer), Delete is `kill`,
// `delete` and the removal of what Create made. The root is the image
// under a per-sandbox writable layer: for runc an overlay whose lower
// layer is an idmapped mount of Image.RootFS (root.go), for runsc
// gVisor's own overlay in its memory (--overlay2=root:memory); the
// workspace is bound at /workspace. runc runs the workload as uid 0 of
// a user namespace mapped to a host id range of its own, with Docker's
// default capabilities less NET_RAW, MKNOD and AUDIT_WRITE,
// no_new_privileges, runc's default masked and read-only paths, and
// linux_sandbox's seccomp allow-list (bundle.go). Limits are the
// runtime's cgroup (memory, pids, cpu), checked after create: a limit
// that did not land fails the Create.
package oci

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Kind is the backend's name in requests.
const Kind = "oci"

// The runtimes a Spec may name (Spec.Runtime); empty is runc.
const (
	RuntimeRunc  = "runc"
	RuntimeRunsc = "runsc"
)

// Runtimes lists the runtimes this backend drives.
var Runtimes = []string{RuntimeRunc, RuntimeRunsc}

func init() { backend.RegisterFactory(Kind, New) }

// Backend runs sandboxes through an OCI runtime binary.
type Backend struct {
	cfg backend.Config
	// dir holds each sandbox's bundle and writable layer; run the
	// runtimes' state and the id slot locks.
	dir string
	run string
}

var (
	_ backend.Backend   = (*Backend)(nil)
	_ backend.Sandboxes = (*Backend)(nil)
)

// New is the backend's factory.
func New(cfg backend.Config) (backend.Backend, error) {
	return &Backend{cfg: cfg, dir: "/var/lib/agent-runner/oci", run: "/run/agent-runner/oci"}, nil
}

// Kind implements backend.Backend.
func (b *Backend) Kind() string { return Kind }

// Capabilities implements backend.Backend. The limits are enforced
// through the runtime's cgroup; a Create whose limits did not land
// fails, so they are listed whenever the backend runs at all.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{
		Isolating: true,
		Enforces: []string{job.LimitTimeout, job.LimitOutput, job.LimitNetwork, job.LimitFSWrite, job.LimitFSRead,
			job.LimitSyscalls, job.LimitHostIDs, job.LimitMemory, job.LimitCPU, job.LimitProcesses},
		NetworkModes: []string{job.NetworkDisabled, job.NetworkAllowlist},
		// A sandbox's root is always an image's (Spec.Image).
		Images: true,
	}
}

// Available implements backend.Backend: root on amd64 (the init is an
// amd64 program), and at least one runtime binary that answers.
func (b *Backend) Available(ctx context.Context) error {
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("the oci backend runs on amd64 only, not %s", runtime.GOARCH)
	}
	if os.Getuid() != 0 {
		return fmt.Errorf("the oci backend needs root (it mounts the sandbox's root and maps its ids), uid is %d", os.Getuid())
	}
	var errs []error
	for _, rt := range Runtimes {
		if _, err := Version(ctx, rt); err == nil {
			return nil
		} else {
			errs = append(errs, err)
		}
	}
	return fmt.Errorf("no OCI runtime works here: %v", errs)
}

// RuntimeAvailable reports whether the runtime rt answers here.
func RuntimeAvailable(ctx context.Context, rt string) error {
	_, err := Version(ctx, rt)
	return err
}

// Version is the first line of `rt --version` (or `runsc --version`).
func Version(ctx context.Context, rt string) (string, error) {
	if !slices.Contains(Runtimes, rt) {
		return "", fmt.Errorf("unknown OCI runtime %q (known: %v)", rt, Runtimes)
	}
	path, err := exec.LookPath(rt)
	if err != nil {
		return "", fmt.Errorf("%s is not installed: %w", rt, err)
	}
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", rt, err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return line, nil
}

// Run implements backend.Backend: Create, one Exec, Delete.
func (b *Backend) Run(ctx context.Context, spec backend.Spec) (backend.Outcome, error) {
	sb, err := b.Create(ctx, spec)
	if err != nil {
		return backend.Outcome{}, err
	}
	s := sb.(*Sandbox)
	defer s.Delete(context.Background())
	p, err := s.start(ctx, backend.Exec{
		Argv: spec.Argv, Env: spec.Env, Cwd: spec.Cwd, Stdin: spec.Stdin, Stdout: spec.Stdout, Stderr: spec.Stderr, TTY: spec.TTY,
	})
	if err != nil {
		return s.outcome(), err
	}
	return p.Wait(ctx)
}

// check refuses what this backend cannot honour, before anything runs.
func (b *Backend) check(spec backend.Spec) error {
	unavailable := func(format string, args ...any) error {
		return job.Errorf(job.CodeBackendUnavail, format, args...).With("backend", Kind)
	}
	rt := runtimeOf(spec)
	switch {
	case !slices.Contains(Runtimes, rt):
		return job.Errorf(job.CodeInvalidRequest, "backend.runtime %q is not one of %v", spec.Runtime, Runtimes).With("field", "backend.runtime")
	case spec.Image == nil || spec.Image.RootFS == "":
		return unavailable("the oci backend runs images only: the request names none")
	case spec.Workspace.Overlay():
		return unavailable("the oci backend takes a copy snapshot, not an overlay workspace")
	case len(spec.Binds) > 0 || len(spec.ReadOnly) > 0 || len(spec.Writable) > 0:
		return unavailable("the oci backend binds nothing but the workspace (no readonly mounts, caches or gateway roots)")
	case spec.Executables != nil:
		return unavailable("the oci backend cannot confine execs to policy.exec_scope every_process")
	case spec.DeniedPrograms != nil && !b.cfg.AllowUnenforcedLimits:
		return unavailable("the oci backend cannot deny programs by file (policy.allow_shell false)")
	case spec.Network == job.NetworkHost:
		return unavailable("the oci backend gives no sandbox the host's network")
	case spec.Network == job.NetworkAllowlist && spec.Egress == nil:
		return unavailable("network allowlist without an egress bridge")
	case spec.Egress != nil && rt == RuntimeRunsc:
		return unavailable("the egress bridge is not built for runsc (gVisor's own network stack): use runc, or network disabled")
	case spec.Limits.DiskBytes > 0 && !b.cfg.AllowUnenforcedLimits:
		return unavailable("the oci backend cannot cap the workspace's disk use")
	}
	return nil
}

func runtimeOf(spec backend.Spec) string {
	if spec.Runtime == "" {
		return RuntimeRunc
	}
	return spec.Runtime
}
