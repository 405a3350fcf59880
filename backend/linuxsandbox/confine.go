package linuxsandbox

import (
	"fmt"
	"os"
	"slices"

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

// dropBoundingSet empties the capability bounding set but keep, so
// nothing the workload execs (setuid binaries, file capabilities) can
// gain a capability beyond them; no_new_privs is set by the seccomp
// load. keep is empty but for root inside an image (imageCaps), which
// execs with exactly those.
func dropBoundingSet(keep []int) error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if slices.Contains(keep, c) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
}

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// restrictLandlock is the second wall behind the mounts: reads and execs
// only within the view, writes only to the workspace, /tmp, /dev/shm and
// the writable binds. Best effort down to Landlock ABI v1; on this
// thread, which forks the workload (landlockthread.go). With an exec
// allow-list (cfg.Executables) the workload executes only its files and
// their ELF interpreters (execallow.go), and nothing of the view; with
// denied programs (cfg.DeniedPrograms) it executes and reads everything
// but them (execdeny.go).
func restrictLandlock(cfg initConfig) error {
	if cfg.Image {
		return restrictLandlockImage(cfg)
	}
	ro := append([]string{"/proc"}, cfg.ReadOnly...)
	if cfg.EgressSocket != "" {
		ro = append(ro, egressDir)
	}
	for _, d := range cfg.Toolchain {
		if _, err := os.Stat(d); err == nil {
			ro = append(ro, d)
		}
	}
	rw := append([]string{WorkspaceMount, "/tmp", "/dev/shm", "/dev/pts"}, cfg.Writable...)
	for _, b := range cfg.Binds {
		if b.ReadOnly && !b.CopyOnWrite {
			ro = append(ro, b.Target)
		} else {
			rw = append(rw, b.Target)
		}
	}
	devices := []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}
	if cfg.TTY {
		devices = append(devices, "/dev/console")
	}
	// An exec allow-list takes EXECUTE from every directory and device
	// and grants it on its files alone.
	x := landlock.AccessFSSet(llsys.AccessFSExecute)
	var allowed []pathRule
	roRules := func(rights landlock.AccessFSSet, roots []string) []pathRule {
		return []pathRule{{access: rights, paths: roots}}
	}
	rwRules := roRules
	if cfg.DeniedPrograms != nil && cfg.Executables == nil {
		// Execute and read everything but the denied programs (execdeny.go).
		d := deniedFiles(cfg.DeniedPrograms, denyDirs(cfg.SearchPath))
		roRules, rwRules = d.rulesAround, d.rulesAround
	}
	if cfg.Executables != nil {
		r, err := execAllowRule(cfg.Executables, cfg.Pinned)
		if err != nil {
			return err
		}
		if err := noExecWritable(rw); err != nil {
			return err
		}
		x, allowed = 0, []pathRule{r}
		ro = withoutProgramDirs(ro)
	}
	rules := []pathRule{
		// "/" may be listed (its entries are the view itself), not read.
		{access: landlock.AccessFSSet(llsys.AccessFSReadDir), paths: []string{"/"}},
		{access: readFiles | writeFiles | x, paths: devices},
		{access: readFiles | x, paths: []string{"/dev/random", "/dev/urandom"}},
		{access: terminalIoctls, paths: terminals},
	}
	rules = append(rules, roRules(readDirs|x, ro)...)
	rules = append(rules, rwRules(readDirs|writeDirs|x, rw)...)
	return restrictThread(append(rules, allowed...))
}

// The rights of landlock.RODirs, RWDirs, ROFiles and RWFiles without
// EXECUTE, which restrictLandlock adds where it may be used.
const (
	readFiles  = landlock.AccessFSSet(llsys.AccessFSReadFile)
	readDirs   = readFiles | landlock.AccessFSSet(llsys.AccessFSReadDir)
	writeFiles = landlock.AccessFSSet(llsys.AccessFSWriteFile | llsys.AccessFSTruncate)
	writeDirs  = writeFiles | landlock.AccessFSSet(llsys.AccessFSRemoveDir|llsys.AccessFSRemoveFile|llsys.AccessFSMakeChar|
		llsys.AccessFSMakeDir|llsys.AccessFSMakeReg|llsys.AccessFSMakeSock|llsys.AccessFSMakeFifo|llsys.AccessFSMakeBlock|llsys.AccessFSMakeSym)
)

// sandboxCounts are the per-user-namespace limits the init sets inside
// the sandbox's own user namespace before it drops its capabilities. The
// kernel charges namespaces and inotify/fanotify objects made inside a
// user namespace to every ancestor namespace as well, up to the host: a
// sandbox must not create any namespace (seccomp refuses the calls too;
// this is the second wall) and gets a bounded share of inotify.
var sandboxCounts = []struct{ name, value string }{
	{"max_user_namespaces", "0"}, {"max_mnt_namespaces", "0"}, {"max_net_namespaces", "0"},
	{"max_pid_namespaces", "0"}, {"max_ipc_namespaces", "0"}, {"max_uts_namespaces", "0"},
	{"max_cgroup_namespaces", "0"}, {"max_time_namespaces", "0"},
	{"max_fanotify_groups", "0"}, {"max_fanotify_marks", "0"},
	{"max_inotify_instances", "128"}, {"max_inotify_watches", "65536"},
}

// limitKernelCounts writes sandboxCounts under /proc/sys/user (the
// sandbox's own proc, so the values are its user namespace's). A kernel
// without one of the files lacks that counter and is skipped.
func limitKernelCounts() error {
	for _, c := range sandboxCounts {
		err := os.WriteFile("/proc/sys/user/"+c.name, []byte(c.value), 0)
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}

// restrictLandlockImage is restrictLandlock for a root made of an image:
// the root is the sandbox's own (its upper layer), so every right is
// granted beneath it, including refer (renames across directories, as
// package managers do), but making device nodes and device ioctls;
// the devices keep their rules. /proc, /dev and the binds are what the
// mounts make them.
func restrictLandlockImage(cfg initConfig) error {
	all := handledFS(landlockABI())
	root := all &^ landlock.AccessFSSet(llsys.AccessFSMakeChar|llsys.AccessFSMakeBlock|llsys.AccessFSIoctlDev)
	devices := []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}
	if cfg.TTY {
		devices = append(devices, "/dev/console")
	}
	return restrictThread([]pathRule{
		{access: root, paths: []string{"/"}},
		{access: readFiles | writeFiles, paths: devices},
		{access: readFiles, paths: []string{"/dev/random", "/dev/urandom"}},
		{access: terminalIoctls, paths: terminals},
	})
}

// terminalIoctls is the right to use a device's ioctls (Landlock ABI 5),
// granted on the sandbox's terminals alone: /dev/tty opened inside (an
// interactive shell's job control asks it for the foreground group) and
// the sandbox's own devpts, where a pty it or the runner opens lives.
// The caller's terminal is never one of them (the runner hands the
// sandbox a pty of its own), so TIOCSTI reaches nothing outside.
const terminalIoctls = landlock.AccessFSSet(llsys.AccessFSIoctlDev)

// terminals are the paths terminalIoctls is granted on (not
// /dev/console: it stays as it was, read and written only).
var terminals = []string{"/dev/tty", "/dev/pts"}
