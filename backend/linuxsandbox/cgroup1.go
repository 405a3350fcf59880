package linuxsandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
)

// cgroup1 is a job's cgroup v1 directories, one per controller (co-mounted
// controllers such as cpu,cpuacct share one), each created under the
// runner's own group in that hierarchy.
type cgroup1 struct {
	dirs map[string]string // controller -> dir
}

// v1Controllers are the hierarchies a job joins.
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

// v1Writable reports whether the runner may create groups beside its own
// memory group (the others follow the same delegation).
func (l cgroupLayout) v1Writable() bool {
	dir, ok := l.v1["memory"]
	return ok && unixAccessW(dir)
}

func unixAccessW(dir string) bool {
	f, err := os.CreateTemp(dir, ".probe-")
	if err == nil {
		f.Close()
		os.Remove(f.Name())
		return true
	}
	// cgroupfs does not allow regular files; try a directory instead.
	d := filepath.Join(dir, fmt.Sprintf(".probe-%d", os.Getpid()))
	if err := os.Mkdir(d, 0o755); err != nil {
		return false
	}
	os.Remove(d)
	return true
}

// newCgroup1 creates name under each of the runner's v1 groups, writes
// the limits, then moves pid in.
func newCgroup1(l cgroupLayout, name string, pid int, lim backend.Limits) (*cgroup1, error) {
	cg := &cgroup1{dirs: map[string]string{}}
	made := map[string]bool{}
	for _, ctrl := range v1Controllers {
		own, ok := l.v1[ctrl]
		if !ok {
			cg.remove()
			return nil, fmt.Errorf("no %s cgroup controller", ctrl)
		}
		dir := filepath.Join(own, name)
		if made[dir] { // co-mounted controllers (cpu,cpuacct) share a dir
			cg.dirs[ctrl] = dir
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, err
		}
		made[dir] = true
		cg.dirs[ctrl] = dir
	}
	type write struct{ ctrl, file, value string }
	var writes []write
	if lim.MemoryBytes > 0 {
		m := strconv.FormatInt(lim.MemoryBytes, 10)
		writes = append(writes, write{"memory", "memory.limit_in_bytes", m},
			write{"memory", "memory.memsw.limit_in_bytes", m},
			write{"memory", "memory.swappiness", "0"})
	}
	if lim.MaxProcesses > 0 {
		writes = append(writes, write{"pids", "pids.max", strconv.FormatInt(lim.MaxProcesses, 10)})
	}
	if lim.CPUCount > 0 {
		writes = append(writes, write{"cpu", "cpu.cfs_period_us", strconv.Itoa(cpuPeriodUsec)},
			write{"cpu", "cpu.cfs_quota_us", strconv.FormatInt(clampV1Quota(l.v1["cpu"], cpuQuotaUsec(lim.CPUCount)), 10)})
	}
	for _, w := range writes {
		err := os.WriteFile(filepath.Join(cg.dirs[w.ctrl], w.file), []byte(w.value), 0o644)
		// Without swap accounting there is no memsw file, and some
		// kernels lack per-group swappiness.
		if err != nil && !(os.IsNotExist(err) && (w.file == "memory.memsw.limit_in_bytes" || w.file == "memory.swappiness")) {
			cg.remove()
			return nil, fmt.Errorf("%s: %w", w.file, err)
		}
	}
	for dir := range made {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			cg.remove()
			return nil, fmt.Errorf("join cgroup: %w", err)
		}
	}
	return cg, nil
}

// cpuPeriodUsec is the CFS period both hierarchies use; the quota is
// cpu_count periods' worth of CPU time per period.
const cpuPeriodUsec = 100000

func cpuQuotaUsec(cpus float64) int64 { return int64(cpus * cpuPeriodUsec) }

func (c *cgroup1) sample() backend.Usage {
	return backend.Usage{
		CPUTime:         time.Duration(readInt(filepath.Join(c.dirs["cpuacct"], "cpuacct.usage"))),
		MemoryBytes:     readInt(filepath.Join(c.dirs["memory"], "memory.usage_in_bytes")),
		PeakMemoryBytes: readInt(filepath.Join(c.dirs["memory"], "memory.max_usage_in_bytes")),
		Processes:       readInt(filepath.Join(c.dirs["pids"], "pids.current")),
	}
}

func (c *cgroup1) oomKilled() bool {
	n, _ := readKeyed(filepath.Join(c.dirs["memory"], "memory.oom_control"), "oom_kill")
	return n > 0
}

// remove deletes the directories once the sandbox's pid namespace (which
// holds every process in them) is gone.
func (c *cgroup1) remove() {
	seen := map[string]bool{}
	for _, dir := range c.dirs {
		if !seen[dir] {
			seen[dir] = true
			removeCgroupDir(dir)
		}
	}
}

func isBusy(err error) bool { return errors.Is(err, unix.EBUSY) }
