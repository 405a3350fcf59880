package linuxsandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
)

// TestCgroupV1QuotaClampedToTheRunners: a runner whose cpu group (or an
// ancestor) has a CFS quota gives a job at most that bandwidth; the
// kernel would refuse more (EINVAL), and the job would run with no cgroup.
func TestCgroupV1QuotaClampedToTheRunners(t *testing.T) {
	for _, tc := range []struct {
		name         string
		own, service string // cpu.cfs_quota_us of agent.service and of the hierarchy above it ("" none)
		period       string // agent.service's cpu.cfs_period_us
		cpus         float64
		want         string
	}{
		{"no quota above", "-1", "", "100000", 2, "200000"},
		{"runner's quota 0.5 CPU", "50000", "", "100000", 2, "50000"},
		{"runner's quota in another period", "25000", "", "50000", 4, "50000"},
		{"under the runner's quota", "300000", "", "100000", 1.5, "150000"},
		{"an ancestor's quota", "-1", "120000", "100000", 2, "120000"},
		{"a tiny quota stays valid", "500", "", "100000", 1, "1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, root := fakeHost(t, v1Mounts, v1Membership)
			for _, d := range []string{"cpu,cpuacct", "memory", "pids"} {
				os.MkdirAll(filepath.Join(root, d, "agent.service"), 0o755)
			}
			cpu := filepath.Join(root, "cpu,cpuacct")
			writeFile(t, filepath.Join(cpu, "agent.service", "cpu.cfs_quota_us"), tc.own+"\n")
			writeFile(t, filepath.Join(cpu, "agent.service", "cpu.cfs_period_us"), tc.period+"\n")
			if tc.service != "" {
				writeFile(t, filepath.Join(cpu, "cpu.cfs_quota_us"), tc.service+"\n")
				writeFile(t, filepath.Join(cpu, "cpu.cfs_period_us"), "100000\n")
			}
			cg, err := h.create("j1", fakeInit, backend.Limits{CPUCount: tc.cpus})
			if err != nil {
				t.Fatal(err)
			}
			defer cg.remove()
			if got := readFile(t, filepath.Join(cpu, "agent.service", "agent-runner-j1-101", "cpu.cfs_quota_us")); got != tc.want {
				t.Errorf("job cpu.cfs_quota_us = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestCgroupV2TopGroup: a root runner that shares its cgroup with other
// processes (a shell under a process manager, no systemd) puts its jobs
// under a top-level group of its own, enabling the controllers in the
// root and in that group; it neither moves itself nor touches the shared
// group.
func TestCgroupV2TopGroup(t *testing.T) {
	h, root, own := fakeV2(t, "0::/process_api/abc\n")
	h.uid = 0
	writeFile(t, filepath.Join(own, "cgroup.procs"), "100\n300\n101\n")
	writeFile(t, filepath.Join(own, "cgroup.controllers"), "")
	if !h.writable() {
		t.Fatal("writable() = false for a root runner with a writable hierarchy root")
	}
	cg, err := h.create("j6", fakeInit, jobLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.remove()
	top := filepath.Join(root, topGroup)
	job := filepath.Join(top, "agent-runner-j6-101")
	got := map[string]string{
		"root subtree_control":   readFile(t, filepath.Join(root, "cgroup.subtree_control")),
		"top subtree_control":    readFile(t, filepath.Join(top, "cgroup.subtree_control")),
		"shared subtree_control": readFile(t, filepath.Join(own, "cgroup.subtree_control")),
		"job memory.max":         readFile(t, filepath.Join(job, "memory.max")),
		"job cpu.max":            readFile(t, filepath.Join(job, "cpu.max")),
		"job pids.max":           readFile(t, filepath.Join(job, "pids.max")),
		"job cgroup.procs":       readFile(t, filepath.Join(job, "cgroup.procs")),
	}
	want := map[string]string{
		"root subtree_control": "+cpu +memory +pids", "top subtree_control": "+cpu +memory +pids", "shared subtree_control": "",
		"job memory.max": "67108864", "job cpu.max": "150000 100000", "job pids.max": "32", "job cgroup.procs": "101",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cgroup files (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(own, runnerLeaf)); err == nil {
		t.Error("the runner made a leaf in the group it shares")
	}
}

// TestCgroupV2TopGroupRefusals: where no top-level group can be made,
// create refuses and names the fix.
func TestCgroupV2TopGroupRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *cgroupHost, root string)
		want  string
	}{
		{"not root", func(h *cgroupHost, root string) { h.uid = 1000 }, "not root"},
		{"a cgroup namespace's root", func(h *cgroupHost, root string) {
			writeFile(t, filepath.Join(root, "cgroup.type"), "domain\n")
		}, "namespace"},
		{"the root offers no memory controller", func(h *cgroupHost, root string) {
			writeFile(t, filepath.Join(root, "cgroup.controllers"), "cpu pids\n")
		}, "memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, root, own := fakeV2(t, "0::/process_api/abc\n")
			h.uid = 0
			writeFile(t, filepath.Join(own, "cgroup.procs"), "100\n300\n")
			tc.setup(&h, root)
			if h.writable() {
				t.Error("writable() = true")
			}
			cg, err := h.create("j7", fakeInit, jobLimits)
			if err == nil {
				cg.remove()
				t.Fatal("create() succeeded")
			}
			for _, w := range []string{tc.want, "Delegate=yes"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("create() error %q does not say %q", err, w)
				}
			}
			if _, err := os.Stat(filepath.Join(root, topGroup)); err == nil {
				t.Error("a top-level group was made anyway")
			}
		})
	}
}
