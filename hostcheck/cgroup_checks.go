package hostcheck

import (
	"fmt"
	"slices"
	"strings"
)

// checks turns the cgroup facts into the report's cgroup section.
func (f cgroupFacts) checks(uid int) []Check {
	checks := []Check{f.layoutCheck()}
	if f.layout != layoutNone {
		checks = append(checks, f.selfCheck(), f.createCheck(uid))
		for _, c := range limitControllers {
			checks = append(checks, f.controllerCheck(c, uid))
		}
	}
	for i := range checks {
		checks[i].Section = SectionCgroups
	}
	return checks
}

func (f cgroupFacts) layoutCheck() Check {
	c := Check{Name: "cgroup_layout", Status: StatusInfo}
	v1 := strings.Join(f.v1Controllers(), ", ")
	switch f.layout {
	case layoutNone:
		c.Status, c.Found = StatusFail, "no cgroup filesystem is mounted: no memory, cpu or process limits"
		c.Fix = "mount cgroup2: mount -t cgroup2 cgroup2 /sys/fs/cgroup (systemd does this at boot; in a container, run it with a cgroup namespace)"
	case layoutV1:
		c.Found = "v1 (legacy): controllers " + v1
	case layoutHybrid:
		c.Found = "hybrid: v1 controllers " + v1 + "; cgroup2 at " + f.unified.Point
	case layoutV2:
		c.Found = "v2 (unified): cgroup2 at " + f.unified.Point
	}
	return c
}

func (f cgroupFacts) selfCheck() Check {
	c := Check{Name: "cgroup_self", Status: StatusInfo}
	if f.ownErr {
		c.Status, c.Found = StatusFail, "/proc/self/cgroup is not readable"
		c.Fix = "mount /proc (the runner reads its own cgroups there)"
		return c
	}
	if !f.usesV1() {
		c.Found = "this process is in " + orNone(f.own[""])
		return c
	}
	var parts []string
	for _, ctrl := range append(slices.Clone(limitControllers), "cpuacct") {
		parts = append(parts, ctrl+":"+orNone(f.own[ctrl]))
	}
	c.Found = "this process is in " + strings.Join(parts, ", ")
	return c
}

func (f cgroupFacts) createCheck(uid int) Check {
	c := Check{Name: "cgroup_create", Status: StatusOK, Found: f.createFound}
	if f.create {
		return c
	}
	c.Status = StatusFail
	c.Found += ": memory, cpu and process limits cannot be applied"
	switch {
	case f.readOnly:
		c.Fix = "the cgroup filesystem is mounted read-only (a container?): give the runner a writable cgroup (on a cgroup v2 host: docker run --cgroupns=private, podman's default), or run it on the host"
	case uid != 0 && f.usesV1():
		c.Fix = "run agent-runner as root, or as a systemd service with User= and Delegate=yes (systemd hands the unit's groups to that user)"
	case uid != 0:
		c.Fix = "run agent-runner as root, or in a delegated group: a systemd service with Delegate=yes, or as this user `loginctl enable-linger $USER` then `systemd-run --user -p Delegate=yes --scope agent-runner serve ...`"
	default:
		c.Fix = "start agent-runner where its group allows child groups: a systemd service with Delegate=yes"
	}
	return c
}

// controllerCheck is one limit controller: memory and pids fail when
// missing (the runner requires those limits), cpu warns.
func (f cgroupFacts) controllerCheck(ctrl string, uid int) Check {
	c := Check{Name: "cgroup_" + ctrl, Status: StatusOK}
	missing := StatusFail
	if ctrl == "cpu" {
		missing = StatusWarn
	}
	cf := f.ctrl[ctrl]
	if slices.Contains(f.kernelOff, ctrl) {
		c.Status, c.Found = missing, "the kernel has the "+ctrl+" controller disabled (/proc/cgroups)"
		c.Fix = "add cgroup_enable=" + ctrl + " to the kernel command line and reboot"
		if ctrl == "memory" {
			c.Fix += " (with swapaccount=1)"
		}
		return c
	}
	if f.usesV1() {
		if !cf.available {
			c.Status, c.Found = missing, "no v1 "+ctrl+" hierarchy holds this process"
			c.Fix = fmt.Sprintf("mount it: mkdir -p /sys/fs/cgroup/%s && mount -t cgroup -o %s cgroup /sys/fs/cgroup/%s", ctrl, ctrl, ctrl)
			return c
		}
		c.Found = "v1, the runner's group is " + cf.dir
		if ctrl == "cpu" {
			c.Found += " (usage is read from cpuacct)"
		}
		return c
	}
	switch {
	case cf.dir == "":
		c.Status, c.Found = missing, "the runner's cgroup v2 group is unknown"
		c.Fix = "mount /proc and the cgroup2 filesystem"
	case !cf.available:
		c.Status, c.Found = missing, ctrl+" is not in "+cf.dir+"/cgroup.controllers: the parent group does not delegate it"
		c.Fix = delegateFix(uid)
	case !cf.delegated:
		c.Status = StatusWarn
		c.Found = ctrl + " is available in " + cf.dir + " but not enabled in its cgroup.subtree_control, so child groups do not get it yet"
		c.Fix = "a group holding processes cannot enable controllers for children: run agent-runner as a systemd service with Delegate=yes (it may then move itself into a leaf and enable " + ctrl + "), or enable it from a parent with no processes: echo +" + ctrl + " > " + cf.dir + "/cgroup.subtree_control"
	default:
		c.Found = ctrl + " is available and enabled for child groups of " + cf.dir
	}
	return c
}

// delegateFix is how a cgroup v2 parent hands controllers to the runner.
func delegateFix(uid int) string {
	if uid == 0 {
		return "run agent-runner as a systemd service with Delegate=yes (or from a group whose parent enables the controller in cgroup.subtree_control)"
	}
	return "delegate the controllers to the user manager: /etc/systemd/system/user@.service.d/delegate.conf with [Service] Delegate=cpu cpuset io memory pids, `systemctl daemon-reload`, `loginctl enable-linger $USER`, then start agent-runner under `systemd-run --user -p Delegate=yes --scope`"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
