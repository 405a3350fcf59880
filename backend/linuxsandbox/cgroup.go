package linuxsandbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/backend"
)

const cgroupRoot = "/sys/fs/cgroup"

// cgroup is one sandbox's cgroup v1 directories (memory, pids, cpu),
// created under the runner's own cgroups. On a pure cgroup v2 host the
// unified hierarchy is used instead.
type cgroup struct {
	dirs map[string]string // controller -> dir
}

// cgroupsWritable reports whether the runner can create cgroups.
func cgroupsWritable() bool {
	own, err := ownCgroups()
	if err != nil {
		return false
	}
	p, ok := own["memory"]
	if !ok {
		return false
	}
	return unixAccessW(filepath.Join(cgroupRoot, "memory", p))
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

// ownCgroups reads /proc/self/cgroup: controller -> path.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "" {
				out[c] = parts[2]
			}
		}
	}
	return out, sc.Err()
}

// newCgroup creates the job's cgroups, applies the limits and moves pid in.
func newCgroup(jobID string, pid int, lim backend.Limits) (*cgroup, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("agent-runner-%s-%d", jobID, pid)
	cg := &cgroup{dirs: map[string]string{}}
	made := map[string]bool{}
	for _, ctrl := range []string{"memory", "pids", "cpu", "cpuacct"} {
		p, ok := own[ctrl]
		if !ok {
			cg.remove()
			return nil, fmt.Errorf("no %s cgroup controller", ctrl)
		}
		mount, err := filepath.EvalSymlinks(filepath.Join(cgroupRoot, ctrl))
		if err != nil {
			cg.remove()
			return nil, err
		}
		dir := filepath.Join(mount, p, name)
		if made[dir] { // co-mounted controllers (cpu,cpuacct) share a dir
			cg.dirs[ctrl] = dir
			continue
		}
		made[dir] = true
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, err
		}
		cg.dirs[ctrl] = dir
	}
	writes := []struct{ ctrl, file, value string }{}
	if lim.MemoryBytes > 0 {
		m := strconv.FormatInt(lim.MemoryBytes, 10)
		writes = append(writes, struct{ ctrl, file, value string }{"memory", "memory.limit_in_bytes", m})
		writes = append(writes, struct{ ctrl, file, value string }{"memory", "memory.memsw.limit_in_bytes", m})
		writes = append(writes, struct{ ctrl, file, value string }{"memory", "memory.swappiness", "0"})
	}
	if lim.MaxProcesses > 0 {
		writes = append(writes, struct{ ctrl, file, value string }{"pids", "pids.max", strconv.FormatInt(lim.MaxProcesses, 10)})
	}
	if lim.CPUCount > 0 {
		writes = append(writes, struct{ ctrl, file, value string }{"cpu", "cpu.cfs_period_us", "100000"})
		writes = append(writes, struct{ ctrl, file, value string }{"cpu", "cpu.cfs_quota_us", strconv.FormatInt(int64(lim.CPUCount*100000), 10)})
	}
	for _, w := range writes {
		err := os.WriteFile(filepath.Join(cg.dirs[w.ctrl], w.file), []byte(w.value), 0o644)
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

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// usage returns peak memory and CPU time.
func (c *cgroup) usage() (int64, time.Duration) {
	peak := readInt(filepath.Join(c.dirs["memory"], "memory.max_usage_in_bytes"))
	cpu := time.Duration(readInt(filepath.Join(c.dirs["cpuacct"], "cpuacct.usage")))
	return peak, cpu
}

// sample reads the group's live usage.
func (c *cgroup) sample() backend.Usage {
	peak, cpu := c.usage()
	return backend.Usage{
		CPUTime:         cpu,
		MemoryBytes:     readInt(filepath.Join(c.dirs["memory"], "memory.usage_in_bytes")),
		PeakMemoryBytes: peak,
		Processes:       readInt(filepath.Join(c.dirs["pids"], "pids.current")),
	}
}

// report calls fn with a sample every interval until done is closed.
func (c *cgroup) report(fn func(backend.Usage), every time.Duration, done <-chan struct{}) {
	if every <= 0 {
		every = 30 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			fn(c.sample())
		}
	}
}

// oomKilled reports whether the kernel OOM-killed a process in the group.
func (c *cgroup) oomKilled() bool {
	b, err := os.ReadFile(filepath.Join(c.dirs["memory"], "memory.oom_control"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" && f[1] != "0" {
			return true
		}
	}
	return false
}

// remove deletes the group's directories once its processes are gone.
func (c *cgroup) remove() {
	seen := map[string]bool{}
	for _, dir := range c.dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		for i := 0; i < 50; i++ {
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
