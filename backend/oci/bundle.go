package oci

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/syscallpolicy"
)

// Paths inside the sandbox.
const (
	workspacePath = "/workspace"
	initPath      = "/.agent-runner/init"
)

// capabilities are Docker's default set less NET_RAW, MKNOD and
// AUDIT_WRITE: what root needs to install software and own files, all
// of it held only in the sandbox's user namespace.
var capabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_SETFCAP",
}

// maskedPaths and readonlyPaths are runc's defaults (`runc spec`), and
// two more masked. There is no /sys: nothing in it is the sandbox's.
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
		"/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi",
		// and what identifies the host's boot.
		"/proc/cmdline", "/proc/sys/kernel/random/boot_id",
	}
	readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// bundleConfig is the config.json of a sandbox: root at dir/rootfs, its
// init bound from dir/init, the workspace at /workspace; base is the
// slot's first host id (runc), cgroup the runtime's cgroupsPath.
func bundleConfig(spec backend.Spec, rt string, base int, cgroup string) *specs.Spec {
	tmp := "size=65536k"
	if spec.Limits.TmpBytes > 0 {
		tmp = "size=" + strconv.FormatInt(spec.Limits.TmpBytes, 10)
	}
	s := &specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: "rootfs"},
		Process: &specs.Process{
			Args: []string{initPath},
			Env:  []string{},
			Cwd:  "/",
			// nobody: the workload, root without CAP_SYS_PTRACE, cannot
			// read the init's /proc entries.
			User:            specs.User{UID: 65534, GID: 65534},
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{},
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
		},
		Hostname: "sandbox",
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", tmp}},
			{Destination: workspacePath, Type: "bind", Source: spec.Workspace.Dir, Options: []string{"rbind", "rw", "nosuid", "nodev"}},
			{Destination: initPath, Type: "bind", Source: "init", Options: []string{"bind", "ro", "nosuid", "nodev"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.CgroupNamespace},
			},
			CgroupsPath:   cgroup,
			Resources:     resources(spec.Limits),
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
			Seccomp:       seccompProfile(),
		},
	}
	if spec.Egress != nil && spec.Egress.CABundle != "" {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: caPath, Type: "bind", Source: spec.Egress.CABundle, Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
	}
	if rt == RuntimeRunc {
		m := []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(base), Size: idRange}}
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		s.Linux.UIDMappings, s.Linux.GIDMappings = m, m
	} else {
		// gVisor mounts /workspace through its gofer and keeps /tmp in
		// its own memory; the root is Image.RootFS under its overlay
		// (--overlay2=root:memory), whose writes stay in its memory.
		s.Root.Path = spec.Image.RootFS
	}
	return s
}

// processConfig is the process.json of one exec.
func processConfig(spec backend.Spec, argv, env []string, cwd string) *specs.Process {
	uid, gid := imageUser(spec.Image)
	return &specs.Process{
		Args:            argv,
		Env:             append([]string{}, env...),
		Cwd:             filepath.Join(workspacePath, cwd),
		User:            specs.User{UID: uid, GID: gid},
		NoNewPrivileges: true,
		Capabilities: &specs.LinuxCapabilities{
			Bounding: capabilities, Effective: capabilities, Permitted: capabilities,
		},
		Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
	}
}

// imageUser is the image config's user as numeric ids: "" and "root"
// are 0; "uid" and "uid:gid" are taken as they are; a name is root
// (the image store resolves names before it hands an Image over).
func imageUser(img *backend.Image) (uint32, uint32) {
	if img == nil {
		return 0, 0
	}
	u, g, _ := strings.Cut(img.User, ":")
	uid, err := strconv.ParseUint(u, 10, 16)
	if err != nil {
		return 0, 0
	}
	gid, err := strconv.ParseUint(g, 10, 16)
	if err != nil {
		gid = uid
	}
	return uint32(uid), uint32(gid)
}

// resources are the cgroup limits of spec.
func resources(lim backend.Limits) *specs.LinuxResources {
	r := &specs.LinuxResources{}
	if lim.MemoryBytes > 0 {
		m := lim.MemoryBytes
		r.Memory = &specs.LinuxMemory{Limit: &m}
	}
	if lim.MaxProcesses > 0 {
		r.Pids = &specs.LinuxPids{Limit: lim.MaxProcesses}
	}
	if lim.CPUCount > 0 {
		period := uint64(100000)
		quota := int64(lim.CPUCount * float64(period))
		r.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
	}
	return r
}

// seccompProfile is linux_sandbox's allow-list for libseccomp: the
// native ABI only (a syscall of another ABI kills the process), the
// allowed names, clone and unshare without namespace flags, socket for
// the allowed families, the usual personalities; the denied names and a
// namespace flag get EPERM, another socket family EAFNOSUPPORT, and
// everything else ENOSYS. Two answers differ from linux_sandbox's
// (ENOSYS where it says EPERM): another personality (libseccomp cannot
// say "none of these values" for one argument) and open_tree_attr
// (libseccomp 2.5 does not know it).
func seccompProfile() *specs.LinuxSeccomp {
	r := syscallpolicy.ByName()
	eperm, enosys, eafnosupport := uint(unix.EPERM), uint(unix.ENOSYS), uint(unix.EAFNOSUPPORT)
	s := &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &enosys,
		Architectures:   []specs.Arch{specs.ArchX86_64},
		Syscalls: []specs.LinuxSyscall{
			{Names: r.Allowed, Action: specs.ActAllow},
			{Names: r.Denied, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"clone", "unshare"}, Action: specs.ActAllow,
				Args: []specs.LinuxSeccompArg{{Index: 0, Value: r.NamespaceFlags, ValueTwo: 0, Op: specs.OpMaskedEqual}}},
		},
	}
	// A namespace flag is EPERM, as linux_sandbox answers.
	for bit := uint64(1); bit != 0; bit <<= 1 {
		if r.NamespaceFlags&bit != 0 {
			s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{Names: []string{"clone", "unshare"}, Action: specs.ActErrno, ErrnoRet: &eperm,
				Args: []specs.LinuxSeccompArg{{Index: 0, Value: bit, ValueTwo: bit, Op: specs.OpMaskedEqual}}})
		}
	}
	// A socket family allowed nowhere is EAFNOSUPPORT.
	var maxFamily uint64
	for _, f := range r.SocketFamilies {
		maxFamily = max(maxFamily, uint64(f))
	}
	for f := uint64(0); f <= maxFamily; f++ {
		if !slices.Contains(r.SocketFamilies, uint32(f)) {
			s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActErrno, ErrnoRet: &eafnosupport,
				Args: []specs.LinuxSeccompArg{{Index: 0, Value: f, Op: specs.OpEqualTo}}})
		}
	}
	s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActErrno, ErrnoRet: &eafnosupport,
		Args: []specs.LinuxSeccompArg{{Index: 0, Value: maxFamily, Op: specs.OpGreaterThan}}})
	for _, f := range r.SocketFamilies {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: uint64(f), Op: specs.OpEqualTo}}})
	}
	for _, p := range r.Personalities {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{Names: []string{"personality"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: uint64(p), Op: specs.OpEqualTo}}})
	}
	return s
}

// writeJSON writes v to path (mode 0600).
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
