package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agent-runner/agent-runner/backend"
)

// The runtime puts the container in a cgroup of its own at cgroupsPath
// (under every v1 controller's hierarchy, or the v2 tree) and writes
// the limits there. checkLimits reads them back, so a limit the runtime
// did not set (no such controller, no permission) fails the Create
// instead of being trusted.

const cgroupRoot = "/sys/fs/cgroup"

func cgroupV2() bool {
	_, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers"))
	return err == nil
}

// cgroupFile is the path of a control file of cg: ctrl is the v1
// controller (ignored on v2).
func cgroupFile(ctrl, cg, name string) string {
	if cgroupV2() {
		return filepath.Join(cgroupRoot, cg, name)
	}
	return filepath.Join(cgroupRoot, ctrl, cg, name)
}

// checkLimits fails unless every limit of lim is what the cgroup cg holds.
func checkLimits(cg string, lim backend.Limits) error {
	v2 := cgroupV2()
	read := func(ctrl, v1, v2name string) (string, error) {
		name := v1
		if v2 {
			name = v2name
		}
		b, err := os.ReadFile(cgroupFile(ctrl, cg, name))
		if err != nil {
			return "", fmt.Errorf("the runtime set no %s limit: %w", ctrl, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if lim.MemoryBytes > 0 {
		v, err := read("memory", "memory.limit_in_bytes", "memory.max")
		if err != nil {
			return err
		}
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n > lim.MemoryBytes {
			return fmt.Errorf("the sandbox's memory limit is %s, not %d", v, lim.MemoryBytes)
		}
	}
	if lim.MaxProcesses > 0 {
		v, err := read("pids", "pids.max", "pids.max")
		if err != nil {
			return err
		}
		if v != strconv.FormatInt(lim.MaxProcesses, 10) {
			return fmt.Errorf("the sandbox's process limit is %s, not %d", v, lim.MaxProcesses)
		}
	}
	if lim.CPUCount > 0 {
		v, err := read("cpu", "cpu.cfs_quota_us", "cpu.max")
		if err != nil {
			return err
		}
		if q, _, _ := strings.Cut(v, " "); q == "max" || q == "-1" {
			return fmt.Errorf("the sandbox's CPU quota is %s", v)
		}
	}
	return nil
}

// oomKills is how many of cg's processes the kernel killed for memory.
func oomKills(cg string) int64 {
	name := "memory.oom_control"
	if cgroupV2() {
		name = "memory.events"
	}
	b, err := os.ReadFile(cgroupFile("memory", cg, name))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
