package linuxsandbox

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// oomAdj is the init's own /proc/self/oom_score_adj, opened for writing
// before Landlock closes /proc to it. The init and the workload share one
// memory cgroup, so when the workload fills it the kernel's OOM killer
// picks the largest process there; that must never be the init (a
// race-instrumented or large binary can outweigh a small workload), or
// the sandbox loses its PID 1 and its result. Each workload process is
// forked with oom_score_adj 1000 (inherited by everything it starts);
// the init goes back to 0, which needs no privilege because it never set
// a lower minimum.
var oomAdj *os.File

// openOOMAdj opens the file; without it workloads start at the init's
// score (best effort: a kernel without the file still runs them).
func openOOMAdj() {
	f, err := os.OpenFile("/proc/self/oom_score_adj", os.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err == nil {
		oomAdj = f
	}
}

// forkExecKillable is syscall.ForkExec with the child's oom_score_adj at
// 1000 and the init's left at 0, and no garbage collection meanwhile
// (execGCPause).
func forkExecKillable(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	if oomAdj != nil {
		_, _ = unix.Pwrite(int(oomAdj.Fd()), []byte("1000"), 0)
		defer func() { _, _ = unix.Pwrite(int(oomAdj.Fd()), []byte("0"), 0) }()
	}
	defer execGCPause()()
	return syscall.ForkExec(path, argv, attr)
}
