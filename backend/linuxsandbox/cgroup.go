package linuxsandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/backend"
)

const cgroupRoot = "/sys/fs/cgroup"

// cgroup is one sandbox's cgroups: cgroup v1 directories (memory, pids,
// cpu, cpuacct; cgroup1.go) on a v1 or hybrid host, one directory on the
// unified hierarchy (cgroup2.go) on a v2 host.
type cgroup struct {
	files cgroupFiles
}

// cgroupFiles is what each hierarchy reads and cleans up.
type cgroupFiles interface {
	// sample reads the group's usage; PeakMemoryBytes and CPUTime
	// cover the group's whole life so far.
	sample() backend.Usage
	// oomKilled reports whether the kernel OOM-killed a process in it.
	oomKilled() bool
	// remove kills what is left and deletes the group.
	remove()
}

// cgroupsWritable reports whether the runner can create job cgroups here.
func cgroupsWritable() bool { return selfCgroups().writable() }

// newCgroup creates the job's cgroups, applies the limits and moves pid
// (the sandbox init, still waiting for its config) in.
func newCgroup(jobID string, pid int, lim backend.Limits) (*cgroup, error) {
	return selfCgroups().create(jobID, pid, lim)
}

func (h cgroupHost) writable() bool {
	l, err := h.layout()
	if err != nil {
		return false
	}
	switch l.mode {
	case cgroupV1, cgroupHybrid:
		return l.v1Writable()
	case cgroupV2:
		return h.v2Writable(l)
	}
	return false
}

func (h cgroupHost) create(jobID string, pid int, lim backend.Limits) (*cgroup, error) {
	l, err := h.layout()
	if err != nil {
		return nil, err
	}
	name := cgroupName(jobID, pid)
	var files cgroupFiles
	switch l.mode {
	case cgroupV1, cgroupHybrid:
		files, err = newCgroup1(l, name, pid, lim)
	case cgroupV2:
		files, err = h.newCgroup2(l, name, pid, lim)
	default:
		err = fmt.Errorf("no cgroup hierarchy is mounted")
	}
	if err != nil {
		return nil, err
	}
	return &cgroup{files: files}, nil
}

// cgroupName names a sandbox's groups in every hierarchy.
func cgroupName(jobID string, pid int) string { return fmt.Sprintf("agent-runner-%s-%d", jobID, pid) }

// usage returns peak memory and CPU time.
func (c *cgroup) usage() (int64, time.Duration) {
	u := c.files.sample()
	return u.PeakMemoryBytes, u.CPUTime
}

// sample reads the group's live usage.
func (c *cgroup) sample() backend.Usage { return c.files.sample() }

// oomKilled reports whether the kernel OOM-killed a process in the group.
func (c *cgroup) oomKilled() bool { return c.files.oomKilled() }

// remove deletes the group once its processes are gone.
func (c *cgroup) remove() { c.files.remove() }

// report calls fn with a sample every interval until done is closed. A
// group without processes is a sandbox that has ended, with Run about to
// return: it is not reported.
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
			if u := c.sample(); u.Processes > 0 {
				fn(u)
			}
		}
	}
}

func readInt(path string) int64 {
	n, _ := readIntErr(path)
	return n
}

// readIntErr reads a file holding one integer.
func readIntErr(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// readKeyed reads one value of a flat keyed file ("key value" lines:
// memory.events, cpu.stat, memory.oom_control).
func readKeyed(path, key string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// removeCgroupDir deletes an emptied cgroup directory, retrying while the
// kernel still counts exiting processes in it (EBUSY).
func removeCgroupDir(dir string) {
	for i := 0; i < 50; i++ {
		err := os.Remove(dir)
		if err == nil || os.IsNotExist(err) || !isBusy(err) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
