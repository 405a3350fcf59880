package hostcheck

import "fmt"

// userns reports whether linux_sandbox can create its user namespace: the
// runner's identity, and the three switches that forbid unprivileged user
// namespaces. A root runner starts each sandbox with CAP_SYS_ADMIN, so only
// user.max_user_namespaces stops it.
func (h Host) userns() []Check {
	root := h.UID == 0
	checks := []Check{rootCheck(h.UID)}

	// Debian and older Ubuntu kernels carry this switch; upstream has none.
	const clone = "kernel.unprivileged_userns_clone"
	switch v, ok := h.sysctl(clone); {
	case !ok:
		checks = append(checks, Check{Name: "unprivileged_userns_clone", Status: StatusInfo, Found: clone + " is not present (a kernel without this switch allows them)"})
	case v != "0":
		checks = append(checks, Check{Name: "unprivileged_userns_clone", Status: StatusOK, Found: clone + " = " + v})
	default:
		checks = append(checks, usernsSwitch("unprivileged_userns_clone", clone+" = 0: unprivileged user namespaces are disabled", root,
			"sysctl -w "+clone+"=1, and persist it: echo "+clone+"=1 > /etc/sysctl.d/50-agent-runner.conf"))
	}

	const max = "user.max_user_namespaces"
	switch v, ok := h.sysctl(max); {
	case !ok:
		checks = append(checks, Check{Name: "max_user_namespaces", Status: StatusFail, Found: max + " is not present: the kernel has no user namespaces",
			Fix: "boot a kernel built with CONFIG_USER_NS=y"})
	case v == "0":
		checks = append(checks, Check{Name: "max_user_namespaces", Status: StatusFail, Found: max + " = 0: no user namespace can be created, even by root",
			Fix: "sysctl -w " + max + "=15000, and persist it: echo " + max + "=15000 > /etc/sysctl.d/50-agent-runner.conf"})
	default:
		checks = append(checks, Check{Name: "max_user_namespaces", Status: StatusOK, Found: max + " = " + v})
	}

	// Ubuntu 23.10 and later: unprivileged user namespaces get no
	// capabilities unless an AppArmor profile allows them.
	const aa = "kernel.apparmor_restrict_unprivileged_userns"
	switch v, ok := h.sysctl(aa); {
	case !ok:
		checks = append(checks, Check{Name: "apparmor_restrict_unprivileged_userns", Status: StatusInfo, Found: aa + " is not present (no AppArmor user-namespace restriction)"})
	case v == "0":
		checks = append(checks, Check{Name: "apparmor_restrict_unprivileged_userns", Status: StatusOK, Found: aa + " = 0"})
	default:
		checks = append(checks, usernsSwitch("apparmor_restrict_unprivileged_userns", aa+" = "+v+": AppArmor denies capabilities in unprivileged user namespaces", root,
			"sysctl -w "+aa+"=0 (persist in /etc/sysctl.d/), or load an AppArmor profile for the agent-runner binary with the `userns,` rule"))
	}
	for i := range checks {
		checks[i].Section = SectionUserns
	}
	return checks
}

// usernsSwitch is a disabled unprivileged-userns switch: fatal for an
// unprivileged runner, a warning for root (whose sandboxes it spares).
func usernsSwitch(name, found string, root bool, fix string) Check {
	if root {
		return Check{Name: name, Status: StatusWarn, Found: found + " (this root runner is not affected; an unprivileged one would be)", Fix: fix}
	}
	return Check{Name: name, Status: StatusFail, Found: found, Fix: fix}
}

// rootCheck says what the runner's uid means for the sandbox.
func rootCheck(uid int) Check {
	if uid == 0 {
		return Check{Name: "root", Status: StatusOK, Found: "running as root (uid 0): every sandbox gets a host uid range of its own, and cgroups can be created"}
	}
	return Check{Name: "root", Status: StatusWarn,
		Found: fmt.Sprintf("running as uid %d, not root: all sandboxes share this uid (host_ids not enforced), and cgroups need delegation", uid),
		Fix:   "run agent-runner as root (a system service) for a host uid range per sandbox"}
}
