package linuxsandbox

import (
	"fmt"
	"os"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// loopbackUp brings up lo in the sandbox's empty network namespace, so
// tests inside can use localhost while nothing else is reachable.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dropBoundingSet empties the capability bounding set, so nothing the
// workload execs (setuid binaries, file capabilities) can gain a
// capability; no_new_privs is set by the seccomp load.
func dropBoundingSet() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
}

// restrictLandlock is the second wall behind the mounts: reads and execs
// only within the view, writes only to the workspace, /tmp, /dev/shm and
// the writable binds. Best effort down to Landlock ABI v1.
func restrictLandlock(cfg initConfig) error {
	ro := append([]string{"/proc"}, cfg.ReadOnly...)
	for _, d := range cfg.Toolchain {
		if _, err := os.Stat(d); err == nil {
			ro = append(ro, d)
		}
	}
	rw := append([]string{WorkspaceMount, "/tmp", "/dev/shm", "/dev/pts"}, cfg.Writable...)
	devices := []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}
	if cfg.TTY {
		devices = append(devices, "/dev/console")
	}
	return landlock.V7.BestEffort().RestrictPaths(
		// "/" may be listed (its entries are the view itself), not read.
		landlock.PathAccess(landlock.AccessFSSet(llsys.AccessFSReadDir), "/"),
		landlock.RODirs(ro...),
		landlock.RWDirs(rw...),
		landlock.RWFiles(devices...),
		landlock.ROFiles("/dev/random", "/dev/urandom"),
	)
}

// deniedSyscalls are refused with EPERM inside the sandbox. Each line says
// why; docs/backends.md repeats the list.
var deniedSyscalls = []string{
	// Filesystem topology: the view is fixed once built.
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	// Namespaces: no new or foreign namespaces. (clone3 is refused
	// separately with ENOSYS, see loadSeccomp.)
	"unshare", "setns",
	// Debugging other processes and reading their memory.
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	// Kernel code, keys and BPF.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf", "perf_event_open",
	"keyctl", "add_key", "request_key",
	// Known kernel attack surface.
	"userfaultfd", "open_by_handle_at", "name_to_handle_at", "io_uring_setup", "io_uring_enter", "io_uring_register",
	// Host-wide state.
	"reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"syslog", "quotactl", "lookup_dcookie", "vhangup", "iopl", "ioperm", "uselib", "nfsservctl",
}

// loadSeccomp installs the deny-list (and no_new_privs) for this process
// and everything it starts.
func loadSeccomp() error {
	return seccomp.LoadFilter(seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{
				{Action: seccomp.ActionErrno, Names: deniedSyscalls},
				// clone3 takes its flags in a struct seccomp cannot read, so
				// namespace flags could hide there. ENOSYS (not EPERM) makes
				// libc fall back to clone, whose flags stay visible.
				{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
			},
		},
	})
}
