package linuxsandbox

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maskedProc are the host-wide files of the sandbox's fresh /proc that
// say something about the host rather than the sandbox, hidden as runc's
// default maskedPaths are (an empty read-only tmpfs over a directory,
// /dev/null over a file; mask.go): the kernel command line, the boot id,
// disk, swap and memory-management statistics, kernel symbols, modules
// and devices, and the debugging interfaces. /proc/meminfo, /proc/stat,
// /proc/cpuinfo and /proc/uptime stay: free, ps, top and language
// runtimes read them, and sysinfo(2) tells the same totals anyway. The
// per-process files (/proc/<pid>) show the sandbox's own pid namespace.
var maskedProc = []string{
	// runc's defaults.
	"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
	"/proc/scsi", "/proc/sysrq-trigger",
	// The host's identity and its disks.
	"/proc/cmdline", "/proc/sys/kernel/random/boot_id", "/proc/diskstats", "/proc/partitions",
	"/proc/swaps", "/proc/mdstat",
	// Memory management and kernel internals.
	"/proc/vmstat", "/proc/zoneinfo", "/proc/buddyinfo", "/proc/pagetypeinfo", "/proc/slabinfo",
	"/proc/vmallocinfo", "/proc/iomem", "/proc/ioports", "/proc/kallsyms", "/proc/modules",
	"/proc/mtrr", "/proc/config.gz", "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup",
	"/proc/fs", "/proc/irq", "/proc/bus", "/proc/driver", "/proc/tty/driver", "/proc/dma",
	"/proc/sys/fs/binfmt_misc",
}

// mountProc mounts a fresh procfs for the sandbox's pid namespace at
// root/proc and hides maskedProc in it.
func mountProc(root string) error {
	if err := mountAt("proc", filepath.Join(root, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("/proc: %w", err)
	}
	for _, p := range maskedProc {
		if err := mask(root, p); err != nil {
			return err
		}
	}
	return nil
}
