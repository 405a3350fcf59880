package linuxsandbox

import (
	"fmt"
	"sort"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// The sandbox's seccomp filter is an allow-list. In order, it:
//
//  1. kills the process for any syscall made through a non-native ABI
//     (i386 `int $0x80` from a 64-bit process, x32 numbers with the
//     0x40000000 bit): their numbers mean other syscalls and a filter
//     written for the native table cannot judge them;
//  2. allows the groups in allowedSyscalls, some only for harmless
//     arguments (clone and unshare without namespace flags, socket for
//     four address families, the usual personality values);
//  3. refuses the groups in deniedSyscalls with EPERM (they are known and
//     refused on purpose, so programs see "not permitted");
//  4. answers every other syscall ENOSYS: ones this table lists nowhere
//     and ones added to the kernel after it was written (open_tree_attr,
//     ...), so a new kernel never widens the sandbox. libc and language
//     runtimes treat ENOSYS as "use the older call" (clone3 -> clone).
//
// docs/backends.md repeats the groups and their reasons.

// syscallGroup is a named set of syscalls with the reason for its verdict.
type syscallGroup struct {
	why   string
	names []string
}

// allowedSyscalls are allowed without looking at their arguments.
var allowedSyscalls = []syscallGroup{
	{"files and directories inside the view (Landlock and the mounts bound what is reachable)", []string{
		"read", "write", "open", "openat", "openat2", "close", "close_range", "creat", "lseek", "pread64", "pwrite64",
		"readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2", "stat", "fstat", "lstat", "newfstatat", "statx",
		"statfs", "fstatfs", "access", "faccessat", "faccessat2", "dup", "dup2", "dup3", "fcntl", "flock", "fsync",
		"fdatasync", "sync", "syncfs", "sync_file_range", "truncate", "ftruncate", "fallocate", "fadvise64", "readahead",
		"getdents", "getdents64", "getcwd", "chdir", "fchdir", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
		"rmdir", "link", "linkat", "unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat", "chmod",
		"fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask", "utime", "utimes",
		"utimensat", "futimesat", "mknod", "mknodat", "sendfile", "splice", "tee", "vmsplice", "copy_file_range",
		"setxattr", "lsetxattr", "fsetxattr", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr",
		"flistxattr", "removexattr", "lremovexattr", "fremovexattr", "setxattrat", "getxattrat", "listxattrat",
		"removexattrat", "ioctl", "memfd_create", "memfd_secret", "statmount", "listmount",
	}},
	{"waiting on descriptors and event sources", []string{
		"poll", "ppoll", "select", "pselect6", "pipe", "pipe2", "epoll_create", "epoll_create1", "epoll_ctl",
		"epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4", "timerfd_create",
		"timerfd_settime", "timerfd_gettime", "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
		"io_setup", "io_destroy", "io_getevents", "io_pgetevents", "io_submit", "io_cancel",
	}},
	{"memory of the process itself", []string{
		"mmap", "mprotect", "munmap", "brk", "mremap", "msync", "mincore", "madvise", "mlock", "mlock2", "munlock",
		"mlockall", "munlockall", "remap_file_pages", "pkey_mprotect", "pkey_alloc", "pkey_free", "membarrier",
		"get_mempolicy", "set_mempolicy", "set_mempolicy_home_node", "mbind", "cachestat", "mseal", "map_shadow_stack",
	}},
	{"processes and threads inside the sandbox's pid namespace", []string{
		"fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "kill", "tkill", "tgkill",
		"getpid", "gettid", "getppid", "getpgrp", "getpgid", "setpgid", "getsid", "setsid", "pidfd_open",
		"pidfd_send_signal", "prctl", "arch_prctl", "set_tid_address", "set_robust_list", "get_robust_list", "rseq",
		"futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue", "restart_syscall", "set_thread_area",
		"get_thread_area", "uname", "sysinfo", "getcpu", "getrandom", "times", "getrusage", "getrlimit", "setrlimit",
		"prlimit64", "getpriority", "setpriority", "ioprio_get", "ioprio_set", "sched_yield", "sched_setparam",
		"sched_getparam", "sched_setscheduler", "sched_getscheduler", "sched_get_priority_max",
		"sched_get_priority_min", "sched_rr_get_interval", "sched_setaffinity", "sched_getaffinity", "sched_setattr",
		"sched_getattr", "uretprobe",
	}},
	{"credentials (no capability is left, so these can only keep or drop ids and capabilities)", []string{
		"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "setuid", "setgid",
		"setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid", "capget", "capset",
	}},
	{"self-restriction (only ever narrows what the process may do)", []string{
		"seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "lsm_get_self_attr",
		"lsm_list_modules",
	}},
	{"signals and timers", []string{
		"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait", "rt_sigqueueinfo",
		"rt_tgsigqueueinfo", "rt_sigsuspend", "sigaltstack", "pause", "alarm", "getitimer", "setitimer", "nanosleep",
		"clock_nanosleep", "gettimeofday", "time", "clock_gettime", "clock_getres", "timer_create", "timer_settime",
		"timer_gettime", "timer_getoverrun", "timer_delete",
	}},
	{"sockets in the sandbox's own network namespace (only lo, or the egress bridge)", []string{
		"connect", "accept", "accept4", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
		"shutdown", "bind", "listen", "getsockname", "getpeername", "socketpair", "setsockopt", "getsockopt",
	}},
	{"System V and POSIX IPC in the sandbox's own ipc namespace", []string{
		"shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop", "msgget", "msgsnd",
		"msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
	}},
}

// deniedSyscalls are refused with EPERM.
var deniedSyscalls = []syscallGroup{
	{"filesystem topology: the view is fixed once built", []string{
		"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "open_tree_attr", "fsopen", "fsconfig",
		"fsmount", "fspick", "mount_setattr",
	}},
	{"namespaces: no new or foreign namespaces (clone and unshare with namespace flags are refused too)", []string{
		"setns",
	}},
	{"other processes' memory and descriptors", []string{
		"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
		"process_mrelease", "move_pages", "migrate_pages",
	}},
	{"kernel code, keys, BPF and tracing", []string{
		"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf", "perf_event_open",
		"keyctl", "add_key", "request_key", "lsm_set_self_attr",
	}},
	{"known kernel attack surface", []string{
		"userfaultfd", "open_by_handle_at", "name_to_handle_at", "io_uring_setup", "io_uring_enter",
		"io_uring_register", "fanotify_init", "fanotify_mark", "modify_ldt",
	}},
	{"host-wide state", []string{
		"reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog",
		"quotactl", "quotactl_fd", "lookup_dcookie", "vhangup", "iopl", "ioperm", "sethostname", "setdomainname",
	}},
}

// enosysSyscalls are in the native table but allowed and denied
// nowhere: they get ENOSYS like any unknown number. A test checks that
// every syscall of the table is in exactly one list.
var enosysSyscalls = []syscallGroup{
	{"removed from the kernel or never implemented", []string{
		"uselib", "ustat", "sysfs", "_sysctl", "create_module", "get_kernel_syms", "query_module", "nfsservctl",
		"getpmsg", "putpmsg", "afs_syscall", "tuxcall", "security", "vserver", "epoll_ctl_old", "epoll_wait_old",
	}},
	{"clone3 passes its flags in a struct seccomp cannot read; ENOSYS makes libc and Go fall back to clone, whose flags are checked", []string{
		"clone3",
	}},
}

// argCheckedSyscalls are allowed only for some argument values (see
// seccompProgram).
var argCheckedSyscalls = []string{"clone", "unshare", "socket", "personality"}

// nsFlags are the clone/unshare flags that create namespaces.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// socketFamilies are the address families socket(2) may create: local
// and IP sockets in the sandbox's own network namespace, and netlink,
// which libc uses to list interfaces. Raw packet, Bluetooth, vsock,
// AF_ALG and the rest are refused with EAFNOSUPPORT.
var socketFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// personalities are the personality(2) values allowed (query, Linux,
// ADDR_NO_RANDOMIZE as `setarch -R` uses, and their UNAME26 variants),
// as Docker's default profile allows.
var personalities = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// Seccomp return values.
const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retKill  = unix.SECCOMP_RET_KILL_PROCESS
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNoSys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	retNoAF  = unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT)
)

// Offsets into struct seccomp_data, and the BPF opcodes the filter uses.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // args[i] at 16+8*i; the low 32 bits come first on little-endian

	opLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	opJeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	opJset   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	opRet    = unix.BPF_RET | unix.BPF_K

	x32SyscallBit = 0x40000000
)

// seccompProgram assembles the filter for the native architecture.
func seccompProgram() ([]unix.SockFilter, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	nr := func(name string) (uint32, error) {
		n, ok := info.SyscallNames[name]
		if !ok {
			return 0, fmt.Errorf("seccomp: syscall %q unknown on %s", name, info.Name)
		}
		return uint32(n), nil
	}
	p := []unix.SockFilter{
		stmt(opLdAbsW, offArch),
		jump(opJeq, uint32(info.ID), 1, 0),
		stmt(opRet, retKill),
		stmt(opLdAbsW, offNr),
	}
	if info.ID == arch.X86_64.ID {
		p = append(p, jump(opJset, x32SyscallBit, 0, 1), stmt(opRet, retKill))
	}
	verdicts := map[uint32]uint32{}
	for _, list := range []struct {
		groups []syscallGroup
		ret    uint32
	}{{allowedSyscalls, retAllow}, {deniedSyscalls, retEPERM}} {
		for _, g := range list.groups {
			for _, name := range g.names {
				n, err := nr(name)
				if err != nil {
					return nil, err
				}
				verdicts[n] = list.ret
			}
		}
	}
	// Sorted, so the program is the same on every run.
	nums := make([]uint32, 0, len(verdicts))
	for n := range verdicts {
		nums = append(nums, n)
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	for _, n := range nums {
		p = append(p, jump(opJeq, n, 0, 1), stmt(opRet, verdicts[n]))
	}
	for _, name := range argCheckedSyscalls[:2] {
		n, err := nr(name)
		if err != nil {
			return nil, err
		}
		// The kernel reads only the low 32 bits of clone's flags; every
		// namespace flag is among them.
		p = append(p,
			jump(opJeq, n, 0, 4),
			stmt(opLdAbsW, offArg0),
			jump(opJset, nsFlags, 1, 0),
			stmt(opRet, retAllow),
			stmt(opRet, retEPERM),
		)
	}
	for _, c := range []struct {
		name    string
		allowed []uint32
		deny    uint32
	}{{"socket", socketFamilies, retNoAF}, {"personality", personalities, retEPERM}} {
		n, err := nr(c.name)
		if err != nil {
			return nil, err
		}
		// jeq nr; ld arg0; (jeq v -> allow)...; ret deny; ret allow; ld nr
		k := len(c.allowed)
		p = append(p, jump(opJeq, n, 0, uint8(k+3)), stmt(opLdAbsW, offArg0))
		for i, v := range c.allowed {
			p = append(p, jump(opJeq, v, uint8(k-i), 0))
		}
		p = append(p, stmt(opRet, c.deny), stmt(opRet, retAllow))
	}
	p = append(p, stmt(opRet, retNoSys))
	if len(p) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: program of %d instructions is too long", len(p))
	}
	return p, nil
}

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// loadSeccomp sets no_new_privs and installs the filter on every thread
// of this process; everything it starts inherits it.
func loadSeccomp() error {
	prog, err := seccompProgram()
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("load seccomp filter: %w", e)
	}
	return nil
}
