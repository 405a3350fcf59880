package hostcheck

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

const procCgroups = `#subsys_name	hierarchy	num_cgroups	enabled
cpuset	3	1	1
cpu	1	14	1
cpuacct	1	14	1
memory	4	89	1
pids	8	15	1
`

// v1Host is a legacy host: cpu and cpuacct co-mounted, the runner in
// /user.slice; the systemd hierarchy's options must not read as
// controllers.
var v1Host = map[string]string{
	"/proc/cgroups": procCgroups,
	"/proc/self/mountinfo": `22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
31 22 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
`,
	"/proc/self/cgroup":                      "4:memory:/user.slice\n3:cpu,cpuacct:/user.slice\n2:pids:/user.slice\n1:name=systemd:/user.slice\n",
	"/sys/fs/cgroup/memory/user.slice/":      "",
	"/sys/fs/cgroup/pids/user.slice/":        "",
	"/sys/fs/cgroup/cpu,cpuacct/user.slice/": "",
}

// hybridHost is this project's machines: v1 controllers and an almost
// empty cgroup2 at /sys/fs/cgroup/unified.
var hybridHost = map[string]string{
	"/proc/cgroups": procCgroups,
	"/proc/self/mountinfo": `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`,
	"/proc/self/cgroup":                      "8:pids:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n",
	"/sys/fs/cgroup/memory/process_api/abc/": "",
	"/sys/fs/cgroup/pids/":                   "",
	"/sys/fs/cgroup/cpu/":                    "",
	"/sys/fs/cgroup/cpuacct/":                "",
}

// v2Host is cgroup v2 only, the runner in a service whose group offers
// cpu, memory and pids but enables only memory and pids for children.
var v2Host = map[string]string{
	"/proc/cgroups": procCgroups,
	"/proc/self/mountinfo": `30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`,
	"/proc/self/cgroup": "0::/system.slice/agent-runner.service\n",
	"/sys/fs/cgroup/system.slice/agent-runner.service/cgroup.controllers":     "cpuset cpu io memory pids\n",
	"/sys/fs/cgroup/system.slice/agent-runner.service/cgroup.subtree_control": "memory pids\n",
}

func TestCgroupLayouts(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		uid   int
		want  map[string]want
	}{
		{"v1", v1Host, 0, map[string]want{
			"cgroup_layout": {StatusInfo, "v1 (legacy): controllers cpu, cpuacct, memory, pids", ""},
			"cgroup_self":   {StatusInfo, "memory:/user.slice, pids:/user.slice, cpu:/user.slice, cpuacct:/user.slice", ""},
			"cgroup_create": {StatusOK, "/sys/fs/cgroup/memory/user.slice, /sys/fs/cgroup/pids/user.slice, /sys/fs/cgroup/cpu,cpuacct/user.slice", ""},
			"cgroup_memory": {StatusOK, "v1, the runner's group is /sys/fs/cgroup/memory/user.slice", ""},
			"cgroup_pids":   {StatusOK, "/sys/fs/cgroup/pids/user.slice", ""},
			"cgroup_cpu":    {StatusOK, "/sys/fs/cgroup/cpu,cpuacct/user.slice", ""},
		}},
		{"hybrid", hybridHost, 0, map[string]want{
			"cgroup_layout": {StatusInfo, "hybrid: v1 controllers cpu, cpuacct, memory, pids; cgroup2 at /sys/fs/cgroup/unified", ""},
			"cgroup_create": {StatusOK, "/sys/fs/cgroup/memory/process_api/abc", ""},
			"cgroup_memory": {StatusOK, "/sys/fs/cgroup/memory/process_api/abc", ""},
			"cgroup_cpu":    {StatusOK, "/sys/fs/cgroup/cpu", ""},
		}},
		{"v2 with cpu not enabled for children", v2Host, 0, map[string]want{
			"cgroup_layout": {StatusInfo, "v2 (unified): cgroup2 at /sys/fs/cgroup", ""},
			"cgroup_self":   {StatusInfo, "/system.slice/agent-runner.service", ""},
			"cgroup_create": {StatusOK, "/sys/fs/cgroup/system.slice/agent-runner.service", ""},
			"cgroup_memory": {StatusOK, "available and enabled for child groups", ""},
			"cgroup_pids":   {StatusOK, "available and enabled", ""},
			"cgroup_cpu":    {StatusWarn, "not enabled in its cgroup.subtree_control", "Delegate=yes"},
		}},
		{"v2 without memory delegated, unprivileged", merge(v2Host, map[string]string{
			"/sys/fs/cgroup/system.slice/agent-runner.service/cgroup.controllers": "cpu pids\n",
		}), 1000, map[string]want{
			"cgroup_memory": {StatusFail, "memory is not in /sys/fs/cgroup/system.slice/agent-runner.service/cgroup.controllers", "Delegate=cpu cpuset io memory pids"},
			"cgroup_cpu":    {StatusWarn, "not enabled", "subtree_control"},
		}},
		{"v2 read-only in a container", merge(v2Host, map[string]string{
			"/proc/self/mountinfo": "30 23 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n",
			"/proc/self/cgroup":    "0::/docker/abc\n",
		}), 0, map[string]want{
			"cgroup_create": {StatusFail, "cannot create child groups in /sys/fs/cgroup/docker/abc (no such file or directory)", "mounted read-only"},
		}},
		{"v1 without delegation, unprivileged", merge(v1Host, map[string]string{
			"/proc/self/cgroup": "4:memory:/user.slice/user-1000.slice\n3:cpu,cpuacct:/user.slice\n2:pids:/user.slice\n",
		}), 1000, map[string]want{
			"cgroup_create": {StatusFail, "cannot create child groups in /sys/fs/cgroup/memory/user.slice/user-1000.slice", "run agent-runner as root, or as a systemd service with User= and Delegate=yes"},
		}},
		{"v1 with memory disabled on the kernel command line", merge(v1Host, map[string]string{
			"/proc/cgroups": "#subsys_name	hierarchy	num_cgroups	enabled\ncpu	1	1	1\ncpuacct	1	1	1\nmemory	0	1	0\npids	8	1	1\n",
			"/proc/self/mountinfo": `32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
`,
		}), 0, map[string]want{
			"cgroup_memory": {StatusFail, "disabled", "cgroup_enable=memory"},
			"cgroup_pids":   {StatusOK, "", ""},
		}},
		{"v1 without a pids hierarchy", merge(v1Host, map[string]string{
			"/proc/self/mountinfo": "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
		}), 0, map[string]want{
			"cgroup_pids": {StatusFail, "no v1 pids hierarchy", "mount -t cgroup -o pids cgroup /sys/fs/cgroup/pids"},
		}},
		{"no cgroups", map[string]string{"/proc/self/mountinfo": "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"}, 0, map[string]want{
			"cgroup_layout": {StatusFail, "no cgroup filesystem", "mount -t cgroup2"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Host{Root: fakeRoot(t, tt.files), UID: tt.uid}
			expect(t, h.cgroups().checks(tt.uid), tt.want)
		})
	}
}

// A child group the probe creates is removed again.
func TestCgroupCreateLeavesNothing(t *testing.T) {
	root := fakeRoot(t, v2Host)
	h := Host{Root: root}
	if f := h.cgroups(); !f.create {
		t.Fatalf("create = false (%s), want true", f.createFound)
	}
	got := listDir(t, root+"/sys/fs/cgroup/system.slice/agent-runner.service")
	if diff := cmp.Diff([]string{"cgroup.controllers", "cgroup.subtree_control"}, got); diff != "" {
		t.Errorf("group dir after the probe (-want +got):\n%s", diff)
	}
}

func TestUnder(t *testing.T) {
	tests := []struct {
		root, point, p string
		want           string
		ok             bool
	}{
		{"/", "/sys/fs/cgroup/memory", "/", "/sys/fs/cgroup/memory", true},
		{"/", "/sys/fs/cgroup", "/user.slice/a", "/sys/fs/cgroup/user.slice/a", true},
		{"/docker/abc", "/sys/fs/cgroup", "/docker/abc/job", "/sys/fs/cgroup/job", true},
		{"/docker/abc", "/sys/fs/cgroup", "/docker/abcdef", "", false},
	}
	for _, tt := range tests {
		got, ok := under(mount{Root: tt.root, Point: tt.point}, tt.p)
		if got != tt.want || ok != tt.ok {
			t.Errorf("under(%q at %q, %q) = %q, %v, want %q, %v", tt.root, tt.point, tt.p, got, ok, tt.want, tt.ok)
		}
	}
}

// A v1 mount's options (xattr, name=systemd) are not controllers.
func TestV1ControllersIgnoreMountOptions(t *testing.T) {
	h := Host{Root: fakeRoot(t, v1Host)}
	got := h.cgroups().v1Controllers()
	if diff := cmp.Diff([]string{"cpu", "cpuacct", "memory", "pids"}, got); diff != "" {
		t.Errorf("v1 controllers (-want +got):\n%s", diff)
	}
}
