package hostcheck

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// landlockProbe is the kernel's Landlock ABI (0 without Landlock) and why
// it is 0.
type landlockProbe struct {
	abi int
	err error
}

func (h Host) landlockABI() landlockProbe {
	if h.LandlockABI == nil {
		return landlockProbe{err: errors.New("no Landlock probe configured")}
	}
	v, err := h.LandlockABI()
	if err != nil {
		return landlockProbe{err: err}
	}
	return landlockProbe{abi: v}
}

// walls reports the sandbox's second and third walls: Landlock and
// seccomp, and the i386 entry point the seccomp filter has to close.
func (h Host) walls(ll landlockProbe) []Check {
	checks := []Check{h.landlockCheck(ll)}
	checks = append(checks, h.seccompChecks()...)
	checks = append(checks, h.i386Check())
	for i := range checks {
		checks[i].Section = SectionWalls
	}
	return checks
}

func (h Host) landlockCheck(ll landlockProbe) Check {
	lsm := strings.TrimSpace(h.read("/sys/kernel/security/lsm"))
	lsmNote := "active LSMs: " + lsm
	if lsm == "" {
		lsmNote = "the LSM list is not readable (securityfs not mounted)"
	}
	if ll.abi > 0 {
		return Check{Name: "landlock", Status: StatusOK, Found: fmt.Sprintf("Landlock ABI %d (linux_sandbox asks for 7, best effort down to 1); %s", ll.abi, lsmNote)}
	}
	found := "no Landlock"
	if ll.err != nil {
		found += " (" + ll.err.Error() + ")"
	}
	found += "; " + lsmNote + ": the sandbox's mounts still hold, its second wall is missing"
	fix := "boot a kernel built with CONFIG_SECURITY_LANDLOCK=y and landlock in its lsm= boot parameter"
	switch {
	case lsm != "" && !slices.Contains(strings.Split(lsm, ","), "landlock"):
		fix = "add landlock to the kernel's lsm= boot parameter: lsm=landlock," + lsm + " (then reboot)"
	case errors.Is(ll.err, unix.EOPNOTSUPP):
		fix = "Landlock is built in but disabled: add landlock to the kernel's lsm= boot parameter (e.g. lsm=landlock,lockdown,yama,integrity,apparmor,bpf) and reboot"
	}
	return Check{Name: "landlock", Status: StatusWarn, Found: found, Fix: fix}
}

// seccompChecks reads the Seccomp field of /proc/self/status (present only
// with CONFIG_SECCOMP) and the filter actions the kernel offers.
func (h Host) seccompChecks() []Check {
	mode, filters := "", ""
	for _, line := range strings.Split(h.read("/proc/self/status"), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "Seccomp":
			mode = strings.TrimSpace(v)
		case "Seccomp_filters":
			filters = strings.TrimSpace(v)
		}
	}
	const kernelFix = "boot a kernel 4.14 or later built with CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y"
	var c Check
	switch mode {
	case "":
		c = Check{Name: "seccomp", Status: StatusFail, Found: "/proc/self/status has no Seccomp field: the kernel has no seccomp", Fix: kernelFix}
	case "0":
		c = Check{Name: "seccomp", Status: StatusOK, Found: "seccomp available; this process runs unfiltered"}
	case "2":
		c = Check{Name: "seccomp", Status: StatusOK, Found: fmt.Sprintf("seccomp available; this process already runs under %s filter(s) (a container's?), the sandbox's filter stacks on them", orUnknown(filters))}
	default:
		c = Check{Name: "seccomp", Status: StatusFail, Found: "this process runs in seccomp mode " + mode + " (strict): it cannot load a filter",
			Fix: "start agent-runner outside strict seccomp mode"}
	}
	actions, ok := h.sysctl("kernel.seccomp.actions_avail")
	var kill Check
	switch {
	case !ok:
		kill = Check{Name: "seccomp_kill_process", Status: StatusFail, Found: "/proc/sys/kernel/seccomp/actions_avail is absent: no seccomp filters, or a kernel older than 4.14", Fix: kernelFix}
	case slices.Contains(strings.Fields(actions), "kill_process"):
		kill = Check{Name: "seccomp_kill_process", Status: StatusOK, Found: "SECCOMP_RET_KILL_PROCESS supported (actions: " + actions + ")"}
	default:
		kill = Check{Name: "seccomp_kill_process", Status: StatusFail, Found: "the kernel's seccomp actions lack kill_process (" + actions + "): the filter kills foreign-ABI syscalls with it", Fix: kernelFix}
	}
	return []Check{c, kill}
}

// i386Check is informational: a 64-bit x86 process can make i386 syscalls
// through int $0x80 when the kernel has IA32 emulation (abi.vsyscall32
// exists then); linux_sandbox's filter kills any such call.
func (h Host) i386Check() Check {
	c := Check{Name: "i386_emulation", Status: StatusInfo}
	if h.Arch != "amd64" {
		c.Found = "not applicable on " + h.Arch
		return c
	}
	if _, ok := h.sysctl("abi.vsyscall32"); !ok {
		c.Found = "absent (no abi.vsyscall32): no i386 syscall entry"
		return c
	}
	if slices.Contains(strings.Fields(h.read("/proc/cmdline")), "ia32_emulation=0") {
		c.Found = "built in but disabled at boot (ia32_emulation=0)"
		return c
	}
	c.Found = "present (CONFIG_IA32_EMULATION): i386 syscalls through int $0x80 are possible; linux_sandbox's seccomp filter kills any"
	return c
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown number of"
	}
	return s
}
