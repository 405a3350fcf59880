package hostcheck

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
)

// The cgroup layouts.
const (
	layoutV1     = "v1"
	layoutHybrid = "hybrid"
	layoutV2     = "v2"
	layoutNone   = "none"
)

// limitControllers are the controllers behind the memory, processes and
// cpu limits, in report order.
var limitControllers = []string{"memory", "pids", "cpu"}

// cgroupFacts is what the cgroup probe saw; the checks and the backends'
// "why not enforced" are both made from it.
type cgroupFacts struct {
	layout  string
	v1      map[string]mount // controller -> its v1 mount
	unified *mount           // the cgroup2 mount, if any
	own     map[string]string
	ownErr  bool // /proc/self/cgroup unreadable
	// ctrl holds memory, pids and cpu.
	ctrl map[string]ctrlFacts
	// create is whether this process can create child groups where the
	// sandbox's would go; createFound says where it tried and what failed.
	create      bool
	createFound string
	readOnly    bool
	// kernelOff lists controllers /proc/cgroups marks disabled.
	kernelOff []string
}

// ctrlFacts is one limit controller as the runner's group sees it.
type ctrlFacts struct {
	dir       string // host path of the runner's group in its hierarchy
	available bool   // mounted (v1) or in cgroup.controllers (v2)
	delegated bool   // v1: same as available; v2: in cgroup.subtree_control
}

// usesV1 reports whether the limit controllers live in v1 hierarchies.
func (f cgroupFacts) usesV1() bool { return f.layout == layoutV1 || f.layout == layoutHybrid }

// cgroups reads the layout from /proc/self/mountinfo, the runner's groups
// from /proc/self/cgroup, and tries to create (and removes) one child
// group in each hierarchy a sandbox would use.
func (h Host) cgroups() cgroupFacts {
	f := cgroupFacts{v1: map[string]mount{}, ctrl: map[string]ctrlFacts{}}
	known := h.controllerNames()
	for _, m := range parseMountinfo(h.read("/proc/self/mountinfo")) {
		switch m.FSType {
		case "cgroup2":
			if f.unified == nil {
				m := m
				f.unified = &m
			}
		case "cgroup":
			for _, c := range m.Super {
				if known[c] {
					f.v1[c] = m
				}
			}
		}
	}
	f.kernelOff = h.disabledControllers()
	switch {
	case len(f.v1) > 0 && f.unified != nil:
		f.layout = layoutHybrid
	case len(f.v1) > 0:
		f.layout = layoutV1
	case f.unified != nil:
		f.layout = layoutV2
	default:
		f.layout = layoutNone
		return f
	}
	self := h.read("/proc/self/cgroup")
	f.ownErr = self == ""
	f.own = ownCgroups(self)

	var dirs []string // where a sandbox's groups would be created
	if f.usesV1() {
		for _, c := range append(slices.Clone(limitControllers), "cpuacct") {
			m, mounted := f.v1[c]
			p, known := f.own[c]
			dir, inside := "", false
			if mounted && known {
				dir, inside = under(m, p)
			}
			if c != "cpuacct" {
				f.ctrl[c] = ctrlFacts{dir: dir, available: inside, delegated: inside}
			}
			if inside && !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
				f.readOnly = f.readOnly || m.ReadOnly()
			}
		}
	} else if p, known := f.own[""]; known {
		if dir, inside := under(*f.unified, p); inside {
			dirs = append(dirs, dir)
			f.readOnly = f.unified.ReadOnly()
			avail := strings.Fields(h.read(dir + "/cgroup.controllers"))
			deleg := strings.Fields(h.read(dir + "/cgroup.subtree_control"))
			for _, c := range limitControllers {
				f.ctrl[c] = ctrlFacts{dir: dir, available: slices.Contains(avail, c), delegated: slices.Contains(deleg, c)}
			}
		}
	}
	f.create, f.createFound = h.tryCreate(dirs)
	return f
}

// tryCreate makes and removes a child group in each dir.
func (h Host) tryCreate(dirs []string) (bool, string) {
	if len(dirs) == 0 {
		return false, "the runner's own group was not found in /proc/self/cgroup"
	}
	var made, failed []string
	for _, dir := range dirs {
		child := h.path(fmt.Sprintf("%s/agent-runner-doctor-%d", dir, os.Getpid()))
		if err := os.Mkdir(child, 0o755); err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", dir, unwrapPath(err)))
			continue
		}
		os.Remove(child)
		made = append(made, dir)
	}
	if len(failed) > 0 {
		return false, "cannot create child groups in " + strings.Join(failed, ", ")
	}
	return true, "child groups can be created in " + strings.Join(made, ", ")
}

// controllerNames are the controllers the kernel knows (/proc/cgroups,
// or the usual v1 set when it cannot be read): the words of a v1 mount's
// options that name a controller rather than an option (xattr, name=...).
func (h Host) controllerNames() map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(h.read("/proc/cgroups"), "\n") {
		if f := strings.Fields(line); len(f) == 4 && !strings.HasPrefix(f[0], "#") {
			names[f[0]] = true
		}
	}
	if len(names) == 0 {
		for _, c := range strings.Fields("cpuset cpu cpuacct blkio memory devices freezer net_cls perf_event net_prio hugetlb pids rdma misc") {
			names[c] = true
		}
	}
	return names
}

// disabledControllers lists the controllers /proc/cgroups marks disabled
// (cgroup_disable= on the kernel command line, or off by default).
func (h Host) disabledControllers() []string {
	var off []string
	for _, line := range strings.Split(h.read("/proc/cgroups"), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[3] == "0" {
			off = append(off, f[0])
		}
	}
	return off
}

// unwrapPath is err without its *PathError path, which the caller names.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// v1Controllers lists the mounted v1 controllers, sorted.
func (f cgroupFacts) v1Controllers() []string {
	cs := make([]string, 0, len(f.v1))
	for c := range f.v1 {
		cs = append(cs, c)
	}
	sort.Strings(cs)
	return cs
}
