package linuxsandbox

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
)

// The fakes: a temp dir stands in for /sys/fs/cgroup, a fake mountinfo
// mounts it, a fake /proc/self/cgroup places the runner (pid 100, parent
// of the sandbox init 101) in it.
const (
	fakeRunner = 100
	fakeInit   = 101
	fakeOther  = 300
)

func fakeHost(t *testing.T, mountinfo, membership string) (cgroupHost, string) {
	t.Helper()
	root := t.TempDir()
	dir := t.TempDir()
	mountinfo = strings.ReplaceAll(mountinfo, "ROOT", root)
	writeFile(t, filepath.Join(dir, "mountinfo"), mountinfo)
	writeFile(t, filepath.Join(dir, "cgroup"), membership)
	parents := map[int]int{fakeInit: fakeRunner, fakeOther: 1}
	return cgroupHost{
		mountinfo: filepath.Join(dir, "mountinfo"),
		cgroup:    filepath.Join(dir, "cgroup"),
		pid:       fakeRunner,
		uid:       1000, // tests of a root runner set 0
		parentOf:  func(pid int) int { return parents[pid] },
	}, root
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Mount tables as the kernel writes them (ROOT is the fake /sys/fs/cgroup).
const (
	v1Mounts = `25 30 0:22 / /proc rw,nosuid - proc proc rw
32 31 0:29 / ROOT/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / ROOT/memory rw,relatime shared:12 - cgroup cgroup rw,memory
39 31 0:36 / ROOT/pids rw,relatime shared:16 - cgroup cgroup rw,pids
40 31 0:37 / ROOT/systemd rw,relatime shared:17 - cgroup cgroup rw,xattr,name=systemd
`
	v1Membership = `12:pids:/agent.service
8:memory:/agent.service
4:cpu,cpuacct:/agent.service
1:name=systemd:/agent.service
`
	hybridMounts = v1Mounts + `41 31 0:38 / ROOT/unified rw,relatime shared:18 - cgroup2 cgroup2 rw,nsdelegate
`
	hybridMembership = v1Membership + "0::/agent.service\n"
	v2Mounts         = `25 30 0:22 / /proc rw,nosuid - proc proc rw
31 23 0:26 / ROOT rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	// A container that sees only its own subtree without a cgroup namespace.
	v2ContainerMounts = `31 23 0:26 /docker/abc ROOT ro,nosuid - cgroup2 cgroup ro
`
)

func TestCgroupLayout(t *testing.T) {
	for _, tc := range []struct {
		name, mounts, membership string
		want                     cgroupLayout // ROOT in paths
	}{
		{"v1", v1Mounts, v1Membership, cgroupLayout{mode: cgroupV1, v1: map[string]string{
			"cpu": "ROOT/cpu,cpuacct/agent.service", "cpuacct": "ROOT/cpu,cpuacct/agent.service",
			"memory": "ROOT/memory/agent.service", "pids": "ROOT/pids/agent.service", "name=systemd": "ROOT/systemd/agent.service",
		}}},
		{"hybrid", hybridMounts, hybridMembership, cgroupLayout{mode: cgroupHybrid, v1: map[string]string{
			"cpu": "ROOT/cpu,cpuacct/agent.service", "cpuacct": "ROOT/cpu,cpuacct/agent.service",
			"memory": "ROOT/memory/agent.service", "pids": "ROOT/pids/agent.service", "name=systemd": "ROOT/systemd/agent.service",
		}}},
		{"v2 root", v2Mounts, "0::/\n", cgroupLayout{mode: cgroupV2, v2: "ROOT", v2Root: "ROOT"}},
		{"v2 systemd unit", v2Mounts, "0::/system.slice/agent-runner.service\n", cgroupLayout{mode: cgroupV2, v2: "ROOT/system.slice/agent-runner.service", v2Root: "ROOT"}},
		{"v2 delegated user unit", v2Mounts, "0::/user.slice/user-1000.slice/user@1000.service/app.slice/agent-runner.service\n",
			cgroupLayout{mode: cgroupV2, v2: "ROOT/user.slice/user-1000.slice/user@1000.service/app.slice/agent-runner.service", v2Root: "ROOT"}},
		{"v2 container subtree", v2ContainerMounts, "0::/docker/abc/runner\n", cgroupLayout{mode: cgroupV2, v2: "ROOT/runner"}},
		{"none", "25 30 0:22 / /proc rw,nosuid - proc proc rw\n", "", cgroupLayout{mode: cgroupNone}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, root := fakeHost(t, tc.mounts, tc.membership)
			got, err := h.layout()
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.v2 = strings.ReplaceAll(want.v2, "ROOT", root)
			want.v2Root = strings.ReplaceAll(want.v2Root, "ROOT", root)
			for k, v := range want.v1 {
				want.v1[k] = strings.ReplaceAll(v, "ROOT", root)
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(cgroupLayout{})); diff != "" {
				t.Errorf("layout() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCgroupLayoutOutsideTheMount(t *testing.T) {
	h, _ := fakeHost(t, v2ContainerMounts, "0::/docker/other\n")
	if l, err := h.layout(); err == nil {
		t.Errorf("layout() = %+v for a cgroup outside the mounted subtree, want an error", l)
	}
}

var jobLimits = backend.Limits{MemoryBytes: 64 << 20, CPUCount: 1.5, MaxProcesses: 32}

func TestCgroupV1WritesLimitsThenJoins(t *testing.T) {
	for _, tc := range []struct{ name, mounts, membership string }{
		{"v1", v1Mounts, v1Membership},
		{"hybrid", hybridMounts, hybridMembership},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, root := fakeHost(t, tc.mounts, tc.membership)
			for _, d := range []string{"cpu,cpuacct", "memory", "pids", "unified"} {
				os.MkdirAll(filepath.Join(root, d, "agent.service"), 0o755)
			}
			if !h.writable() {
				t.Fatal("writable() = false for the runner's own writable groups")
			}
			cg, err := h.create("j1", fakeInit, jobLimits)
			if err != nil {
				t.Fatal(err)
			}
			job := "agent.service/agent-runner-j1-101"
			got := map[string]string{}
			for _, f := range []string{
				"memory/" + job + "/memory.limit_in_bytes", "memory/" + job + "/memory.memsw.limit_in_bytes",
				"memory/" + job + "/memory.swappiness", "memory/" + job + "/cgroup.procs",
				"pids/" + job + "/pids.max", "pids/" + job + "/cgroup.procs",
				"cpu,cpuacct/" + job + "/cpu.cfs_period_us", "cpu,cpuacct/" + job + "/cpu.cfs_quota_us", "cpu,cpuacct/" + job + "/cgroup.procs",
			} {
				got[f] = readFile(t, filepath.Join(root, f))
			}
			want := map[string]string{
				"memory/" + job + "/memory.limit_in_bytes": "67108864", "memory/" + job + "/memory.memsw.limit_in_bytes": "67108864",
				"memory/" + job + "/memory.swappiness": "0", "memory/" + job + "/cgroup.procs": "101",
				"pids/" + job + "/pids.max": "32", "pids/" + job + "/cgroup.procs": "101",
				"cpu,cpuacct/" + job + "/cpu.cfs_period_us": "100000", "cpu,cpuacct/" + job + "/cpu.cfs_quota_us": "150000", "cpu,cpuacct/" + job + "/cgroup.procs": "101",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cgroup files (-want +got):\n%s", diff)
			}
			if entries, _ := os.ReadDir(filepath.Join(root, "unified", "agent.service")); len(entries) != 0 {
				t.Errorf("the controller-less cgroup2 mount got %d entries, want none", len(entries))
			}
			writeFile(t, filepath.Join(root, "memory", job, "memory.max_usage_in_bytes"), "5000\n")
			writeFile(t, filepath.Join(root, "memory", job, "memory.usage_in_bytes"), "4000\n")
			writeFile(t, filepath.Join(root, "cpu,cpuacct", job, "cpuacct.usage"), "2500000000\n")
			writeFile(t, filepath.Join(root, "pids", job, "pids.current"), "3\n")
			writeFile(t, filepath.Join(root, "memory", job, "memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
			if diff := cmp.Diff(backend.Usage{CPUTime: 2500 * time.Millisecond, MemoryBytes: 4000, PeakMemoryBytes: 5000, Processes: 3}, cg.sample()); diff != "" {
				t.Errorf("sample() (-want +got):\n%s", diff)
			}
			if !cg.oomKilled() {
				t.Error("oomKilled() = false with oom_kill 1")
			}
		})
	}
}

// fakeV2 lays out a unified hierarchy: the root (no cgroup.type) and the
// runner's own cgroup at own, each listing every controller.
func fakeV2(t *testing.T, membership string) (cgroupHost, string, string) {
	t.Helper()
	h, root := fakeHost(t, v2Mounts, membership)
	writeFile(t, filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma misc\n")
	writeFile(t, filepath.Join(root, "cgroup.subtree_control"), "")
	own := filepath.Join(root, strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(membership, "0::")), "/"))
	if own != root {
		writeFile(t, filepath.Join(own, "cgroup.type"), "domain\n")
		writeFile(t, filepath.Join(own, "cgroup.controllers"), "cpu memory pids\n")
		writeFile(t, filepath.Join(own, "cgroup.subtree_control"), "")
	}
	return h, root, own
}

func TestCgroupV2(t *testing.T) {
	for _, tc := range []struct {
		name       string
		membership string
		procs      string // in the runner's own cgroup
		wantParent string // relative to the root
	}{
		{"root runner", "0::/\n", "1\n100\n101\n", ""},
		{"systemd unit with Delegate=yes", "0::/system.slice/agent-runner.service\n", "100\n101\n", "system.slice/agent-runner.service"},
		{"rootless delegated subtree", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/agent-runner.service\n", "100\n",
			"user.slice/user-1000.slice/user@1000.service/app.slice/agent-runner.service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, root, own := fakeV2(t, tc.membership)
			writeFile(t, filepath.Join(own, "cgroup.procs"), tc.procs)
			moved := func() []string { return nil }
			if own != root {
				moved = recordWrites(t, filepath.Join(own, runnerLeaf, "cgroup.procs"))
			}
			if !h.writable() {
				t.Fatal("writable() = false")
			}
			cg, err := h.create("j1", fakeInit, jobLimits)
			if err != nil {
				t.Fatal(err)
			}
			defer cg.remove()
			parent := filepath.Join(root, tc.wantParent)
			job := filepath.Join(parent, "agent-runner-j1-101")
			got := map[string]string{}
			for _, f := range []string{"memory.max", "memory.swap.max", "cpu.max", "pids.max", "cgroup.procs"} {
				got[f] = readFile(t, filepath.Join(job, f))
			}
			got["parent subtree_control"] = readFile(t, filepath.Join(parent, "cgroup.subtree_control"))
			want := map[string]string{
				"memory.max": "67108864", "memory.swap.max": "0", "cpu.max": "150000 100000", "pids.max": "32", "cgroup.procs": "101",
				"parent subtree_control": "+cpu +memory +pids",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cgroup files (-want +got):\n%s", diff)
			}
			if own == root {
				if _, err := os.Stat(filepath.Join(root, runnerLeaf)); err == nil {
					t.Error("a root runner moved itself into a leaf; the root may hold processes")
				}
				return
			}
			// The runner moves first, so a child it forks meanwhile is born in the leaf.
			wantMoved := "100"
			if strings.Contains(tc.procs, "101") {
				wantMoved += "101"
			}
			if got := strings.Join(moved(), ""); got != wantMoved {
				t.Errorf("writes to %s/cgroup.procs = %q, want %q (the runner, then its init)", runnerLeaf, got, wantMoved)
			}
		})
	}
}

// recordWrites makes path a FIFO and returns a function that ends the
// recording and returns what was written to it, in order (a regular fake
// file keeps only the last write; writes close together may arrive in
// one piece).
func recordWrites(t *testing.T, path string) func() []string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	const end = "\x00end"
	// Held open for reading and writing from the start, so a writer
	// never finds the FIFO without a reader (EPIPE, as reopening it per
	// write allowed) and a read never sees end of file; the writes are
	// joined by the caller anyway.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var writes []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		var got string
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			got += string(buf[:n])
			if rest, ended := strings.CutSuffix(got, end); ended || err != nil {
				if rest != "" {
					writes = append(writes, rest)
				}
				return
			}
		}
	}()
	var once sync.Once
	stop := func() []string {
		once.Do(func() { os.WriteFile(path, []byte(end), 0o644) })
		<-done
		return writes
	}
	t.Cleanup(func() { stop() })
	return stop
}

func TestCgroupV2RunnerAlreadyInItsLeaf(t *testing.T) {
	h, root, own := fakeV2(t, "0::/system.slice/agent-runner.service/runner\n")
	unit := filepath.Dir(own)
	writeFile(t, filepath.Join(unit, "cgroup.type"), "domain\n")
	writeFile(t, filepath.Join(unit, "cgroup.controllers"), "cpu memory pids\n")
	writeFile(t, filepath.Join(unit, "cgroup.subtree_control"), "cpu memory pids\n")
	writeFile(t, filepath.Join(unit, "cgroup.procs"), "")
	if !h.writable() {
		t.Fatal("writable() = false")
	}
	cg, err := h.create("j2", fakeInit, backend.Limits{MemoryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.remove()
	if got, want := readFile(t, filepath.Join(unit, "agent-runner-j2-101", "cgroup.procs")), "101"; got != want {
		t.Errorf("job cgroup.procs = %q, want %q", got, want)
	}
	if got, want := readFile(t, filepath.Join(unit, "cgroup.subtree_control")), "cpu memory pids"; got != want {
		t.Errorf("subtree_control rewritten to %q, want it left as %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(own, runnerLeaf)); err == nil {
		t.Error("the runner nested a second leaf inside its leaf")
	}
	_ = root
}

func TestCgroupV2Refusals(t *testing.T) {
	for _, tc := range []struct {
		name        string
		controllers string // of the runner's own cgroup
		procs       string
	}{
		{"controllers not delegated", "cpu pids\n", "100\n"},
		{"another process shares the runner's cgroup", "cpu memory pids\n", "100\n300\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, own := fakeV2(t, "0::/user.slice/user-1000.slice/session-2.scope\n")
			writeFile(t, filepath.Join(own, "cgroup.controllers"), tc.controllers)
			writeFile(t, filepath.Join(own, "cgroup.procs"), tc.procs)
			if h.writable() {
				t.Error("writable() = true")
			}
			if cg, err := h.create("j3", fakeInit, jobLimits); err == nil {
				cg.remove()
				t.Fatal("create() succeeded")
			}
			if got, want := readFile(t, filepath.Join(own, "cgroup.subtree_control")), ""; got != want {
				t.Errorf("subtree_control = %q after a refusal, want %q", got, want)
			}
			if _, err := os.Stat(filepath.Join(own, "agent-runner-j3-101")); err == nil {
				t.Error("a job cgroup was left behind")
			}
		})
	}
}

func TestCgroupV2Usage(t *testing.T) {
	h, _, own := fakeV2(t, "0::/agent.service\n")
	writeFile(t, filepath.Join(own, "cgroup.procs"), "100\n")
	cg, err := h.create("j4", fakeInit, jobLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.remove()
	job := filepath.Join(own, "agent-runner-j4-101")
	writeFile(t, filepath.Join(job, "cpu.stat"), "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
	writeFile(t, filepath.Join(job, "memory.current"), "4096\n")
	writeFile(t, filepath.Join(job, "memory.peak"), "8192\n")
	writeFile(t, filepath.Join(job, "pids.current"), "2\n")
	writeFile(t, filepath.Join(job, "memory.events"), "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\noom_group_kill 0\n")
	if diff := cmp.Diff(backend.Usage{CPUTime: 1500 * time.Millisecond, MemoryBytes: 4096, PeakMemoryBytes: 8192, Processes: 2}, cg.sample()); diff != "" {
		t.Errorf("sample() (-want +got):\n%s", diff)
	}
	if cg.oomKilled() {
		t.Error("oomKilled() = true with oom_kill 0")
	}
	writeFile(t, filepath.Join(job, "memory.events"), "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n")
	if !cg.oomKilled() {
		t.Error("oomKilled() = false with oom_kill 1")
	}
	writeFile(t, filepath.Join(job, "cgroup.kill"), "")
	cg.remove()
	if got, want := readFile(t, filepath.Join(job, "cgroup.kill")), "1"; got != want {
		t.Errorf("cgroup.kill = %q after remove, want %q", got, want)
	}
}

// TestCgroupV2PeakWithoutMemoryPeak: before Linux 5.19 there is no
// memory.peak, so the peak is the largest memory.current seen.
func TestCgroupV2PeakWithoutMemoryPeak(t *testing.T) {
	h, _, own := fakeV2(t, "0::/agent.service\n")
	writeFile(t, filepath.Join(own, "cgroup.procs"), "100\n")
	cg, err := h.create("j5", fakeInit, jobLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.remove()
	job := filepath.Join(own, "agent-runner-j5-101")
	watch := cg.files.(*cgroup2).peak
	if watch == nil {
		t.Fatal("no peak watcher without memory.peak")
	}
	// A short spike, gone before the final sample: only the watcher sees it.
	for deadline := time.Now().Add(5 * time.Second); watch.max() < 70000 && time.Now().Before(deadline); {
		writeFile(t, filepath.Join(job, "memory.current"), "70000\n")
		time.Sleep(3 * peakEvery)
	}
	writeFile(t, filepath.Join(job, "memory.current"), "100\n")
	u := cg.sample()
	if u.PeakMemoryBytes != 70000 || u.MemoryBytes != 100 {
		t.Errorf("sample() = peak %d current %d, want peak 70000 current 100", u.PeakMemoryBytes, u.MemoryBytes)
	}
}

func TestParentPid(t *testing.T) {
	if got, want := parentPid(os.Getpid()), os.Getppid(); got != want {
		t.Errorf("parentPid(self) = %d, want %d", got, want)
	}
}
