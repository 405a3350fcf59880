// Package syscallpolicy is the sandboxes' seccomp allow-list by syscall
// name: which syscalls are allowed, which refused with EPERM, which
// answer ENOSYS, and the arguments the argument-checked ones may take.
// linux_sandbox compiles it into its own BPF filter; the oci backend
// hands it to the OCI runtime's libseccomp. Neither owns it, so neither
// backend imports the other.
package syscallpolicy

import "golang.org/x/sys/unix"

// Group is a named set of syscalls with the reason for its verdict.
type Group struct {
	Why   string
	Names []string
}

// Allowed are allowed without looking at their arguments.
var Allowed = []Group{
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

// Denied are refused with EPERM.
var Denied = []Group{
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

// ENOSYS are in the native table but allowed and denied
// nowhere: they get ENOSYS like any unknown number. A test checks that
// every syscall of the table is in exactly one list.
var ENOSYS = []Group{
	{"removed from the kernel or never implemented", []string{
		"uselib", "ustat", "sysfs", "_sysctl", "create_module", "get_kernel_syms", "query_module", "nfsservctl",
		"getpmsg", "putpmsg", "afs_syscall", "tuxcall", "security", "vserver", "epoll_ctl_old", "epoll_wait_old",
	}},
	{"clone3 passes its flags in a struct seccomp cannot read; ENOSYS makes libc and Go fall back to clone, whose flags are checked", []string{
		"clone3",
	}},
}

// ArgChecked are allowed only for some argument values (see
// seccompProgram).
var ArgChecked = []string{"clone", "unshare", "socket", "personality"}

// NamespaceFlags are the clone/unshare flags that create namespaces.
const NamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// SocketFamilies are the address families socket(2) may create: local
// and IP sockets in the sandbox's own network namespace, and netlink,
// which libc uses to list interfaces. Raw packet, Bluetooth, vsock,
// AF_ALG and the rest are refused with EAFNOSUPPORT.
var SocketFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// Personalities are the personality(2) values allowed (query, Linux,
// ADDR_NO_RANDOMIZE as `setarch -R` uses, and their UNAME26 variants),
// as Docker's default profile allows.
var Personalities = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// Rules is the sandbox's seccomp allow-list by syscall name, for
// a backend that hands it to another enforcer (an OCI runtime's
// libseccomp) instead of loading this package's filter: the same
// groups, in the same verdicts (each group says why it is there).
// Every syscall named in neither list, and every one whose arguments
// the rules below do not allow, gets ENOSYS.
type Rules struct {
	// Allowed are allowed whatever their arguments.
	Allowed []string
	// Denied are refused with EPERM.
	Denied []string
	// NamespaceFlags are the clone and unshare flags that create
	// namespaces: those two are allowed only with none of them set.
	NamespaceFlags uint64
	// SocketFamilies are the address families socket(2) may create;
	// another family is refused with EAFNOSUPPORT.
	SocketFamilies []uint32
	// Personalities are the personality(2) values allowed.
	Personalities []uint32
}

// ByName returns the allow-list as Rules (fresh slices).
func ByName() Rules {
	names := func(groups []Group) []string {
		var out []string
		for _, g := range groups {
			out = append(out, g.Names...)
		}
		return out
	}
	return Rules{
		Allowed:        names(Allowed),
		Denied:         names(Denied),
		NamespaceFlags: NamespaceFlags,
		SocketFamilies: append([]uint32{}, SocketFamilies...),
		Personalities:  append([]uint32{}, Personalities...),
	}
}
