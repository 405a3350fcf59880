package linuxsandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agent-runner/agent-runner/procself"
)

// cgroupHost names where the runner learns its cgroups: its mount table,
// its own cgroup membership and its pid. Tests point it at fakes (a temp
// dir stands in for /sys/fs/cgroup through a fake mountinfo).
type cgroupHost struct {
	mountinfo string // /proc/self/mountinfo
	cgroup    string // /proc/self/cgroup
	pid       int    // the runner's pid
	uid       int    // the runner's effective uid (0 may create top-level groups)
	// parentOf returns a process's parent pid (0 when it is gone).
	parentOf func(pid int) int
}

// selfCgroups is the running process's view.
func selfCgroups() cgroupHost {
	return cgroupHost{mountinfo: "/proc/self/mountinfo", cgroup: "/proc/self/cgroup", pid: os.Getpid(), uid: os.Geteuid(), parentOf: parentPid}
}

// cgroupMode is how the host mounts its cgroup hierarchies.
type cgroupMode int

const (
	cgroupNone   cgroupMode = iota // no usable hierarchy
	cgroupV1                       // only v1 hierarchies
	cgroupHybrid                   // v1 controllers beside a controller-less cgroup2 mount (systemd's hybrid mode)
	cgroupV2                       // one unified cgroup2 hierarchy holding the controllers
)

func (m cgroupMode) String() string {
	return [...]string{"none", "v1", "hybrid", "v2"}[m]
}

// cgroupLayout is the mode and where the runner's own cgroups are.
type cgroupLayout struct {
	mode cgroupMode
	// v1 maps a controller to the runner's own directory in its
	// hierarchy (v1 and hybrid).
	v1 map[string]string
	// v2 is the runner's own directory on the unified hierarchy (v2).
	v2 string
	// v2Root is where the unified hierarchy's root is mounted, when the
	// mount shows the whole hierarchy (v2; "" for a mounted subtree).
	v2Root string
}

// cgroupMount is one cgroup mount from mountinfo.
type cgroupMount struct {
	point string // where it is mounted
	root  string // the hierarchy path it shows at point
	v2    bool
	ctrls []string // v1: the controllers (and name=) in its options
}

// layout reads the mount table and the runner's membership. The v1
// controllers win when both kinds are mounted: a hybrid host's cgroup2
// mount holds no memory, pids or cpu controller.
func (h cgroupHost) layout() (cgroupLayout, error) {
	mounts, err := readCgroupMounts(h.mountinfo)
	if err != nil {
		return cgroupLayout{}, err
	}
	member, err := readCgroupMembership(h.cgroup)
	if err != nil {
		return cgroupLayout{}, err
	}
	var unified *cgroupMount
	v1 := map[string]cgroupMount{}
	for i, m := range mounts {
		if m.v2 {
			if unified == nil || m.point == cgroupRoot {
				unified = &mounts[i]
			}
			continue
		}
		for _, c := range m.ctrls {
			v1[c] = m
		}
	}
	if _, ok := v1["memory"]; ok {
		l := cgroupLayout{mode: cgroupV1, v1: map[string]string{}}
		if unified != nil {
			l.mode = cgroupHybrid
		}
		for ctrl, m := range v1 {
			p, ok := member[ctrl]
			if !ok {
				continue
			}
			dir, err := m.dir(p)
			if err != nil {
				return cgroupLayout{}, err
			}
			l.v1[ctrl] = dir
		}
		return l, nil
	}
	if unified != nil {
		p, ok := member[""]
		if !ok {
			return cgroupLayout{}, fmt.Errorf("%s has no cgroup v2 entry (0::)", h.cgroup)
		}
		dir, err := unified.dir(p)
		if err != nil {
			return cgroupLayout{}, err
		}
		l := cgroupLayout{mode: cgroupV2, v2: dir}
		if unified.root == "/" {
			l.v2Root = unified.point
		}
		return l, nil
	}
	return cgroupLayout{mode: cgroupNone}, nil
}

// dir is where the cgroup at path (as /proc/self/cgroup names it) lies
// under this mount. A mount of a subtree (a container's) shows path
// relative to its root.
func (m cgroupMount) dir(path string) (string, error) {
	rel := path
	if m.root != "/" {
		if path != m.root && !strings.HasPrefix(path, m.root+"/") {
			return "", fmt.Errorf("cgroup %s lies outside the mount of %s at %s", path, m.root, m.point)
		}
		rel = strings.TrimPrefix(path, m.root)
	}
	if strings.Contains(rel, "/..") {
		return "", fmt.Errorf("cgroup path %s is outside this cgroup namespace", path)
	}
	return filepath.Join(m.point, rel), nil
}

// readCgroupMounts returns the cgroup and cgroup2 mounts of a mountinfo
// file.
func readCgroupMounts(path string) ([]cgroupMount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mounts, err := procself.Mounts(f)
	if err != nil {
		return nil, err
	}
	var out []cgroupMount
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup2":
			out = append(out, cgroupMount{point: m.Point, root: m.Root, v2: true})
		case "cgroup":
			out = append(out, cgroupMount{point: m.Point, root: m.Root, ctrls: m.Super})
		}
	}
	return out, nil
}

// readCgroupMembership reads a /proc/<pid>/cgroup file (procself.Cgroups).
func readCgroupMembership(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return procself.Cgroups(f)
}

// parentPid reads a process's parent from /proc/<pid>/stat (0 when gone).
func parentPid(pid int) int { return statField(pid, 1) }

// statField is field n (0: state, 1: ppid, 2: pgrp...) of
// /proc/<pid>/stat after the command name, 0 when it cannot be read. The
// name may hold spaces and parentheses: the fields after it start past
// the last ')'.
func statField(pid, n int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) <= n {
		return 0
	}
	v, _ := strconv.Atoi(f[n])
	return v
}
