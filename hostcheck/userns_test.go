package hostcheck

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestUserNamespaces(t *testing.T) {
	allowed := map[string]string{"/proc/sys/user/max_user_namespaces": "96365\n"}
	tests := []struct {
		name  string
		files map[string]string
		uid   int
		want  map[string]want
	}{
		{"upstream kernel, root", allowed, 0, map[string]want{
			"root":                                  {StatusOK, "running as root", ""},
			"unprivileged_userns_clone":             {StatusInfo, "not present", ""},
			"max_user_namespaces":                   {StatusOK, "user.max_user_namespaces = 96365", ""},
			"apparmor_restrict_unprivileged_userns": {StatusInfo, "not present", ""},
		}},
		{"unprivileged runner", allowed, 1000, map[string]want{
			"root": {StatusWarn, "uid 1000, not root", "run agent-runner as root"},
		}},
		{"Debian switch off, unprivileged", merge(allowed, map[string]string{"/proc/sys/kernel/unprivileged_userns_clone": "0\n"}), 1000, map[string]want{
			"unprivileged_userns_clone": {StatusFail, "kernel.unprivileged_userns_clone = 0", "sysctl -w kernel.unprivileged_userns_clone=1"},
		}},
		{"Debian switch off, root", merge(allowed, map[string]string{"/proc/sys/kernel/unprivileged_userns_clone": "0\n"}), 0, map[string]want{
			"unprivileged_userns_clone": {StatusWarn, "this root runner is not affected", "kernel.unprivileged_userns_clone=1"},
		}},
		{"Debian switch on", merge(allowed, map[string]string{"/proc/sys/kernel/unprivileged_userns_clone": "1\n"}), 1000, map[string]want{
			"unprivileged_userns_clone": {StatusOK, "= 1", ""},
		}},
		{"no user namespaces at all", map[string]string{"/proc/sys/user/max_user_namespaces": "0\n"}, 0, map[string]want{
			"max_user_namespaces": {StatusFail, "even by root", "sysctl -w user.max_user_namespaces=15000"},
		}},
		{"kernel without CONFIG_USER_NS", map[string]string{}, 0, map[string]want{
			"max_user_namespaces": {StatusFail, "not present", "CONFIG_USER_NS"},
		}},
		{"Ubuntu 24.04 AppArmor restriction, unprivileged", merge(allowed, map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n"}), 1000, map[string]want{
			"apparmor_restrict_unprivileged_userns": {StatusFail, "AppArmor denies capabilities", "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"},
		}},
		{"Ubuntu 24.04 AppArmor restriction, root", merge(allowed, map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n"}), 0, map[string]want{
			"apparmor_restrict_unprivileged_userns": {StatusWarn, "not affected", "kernel.apparmor_restrict_unprivileged_userns=0"},
		}},
		{"AppArmor restriction lifted", merge(allowed, map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "0\n"}), 1000, map[string]want{
			"apparmor_restrict_unprivileged_userns": {StatusOK, "= 0", ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Host{Root: fakeRoot(t, tt.files), UID: tt.uid}
			expect(t, h.userns(), tt.want)
		})
	}
}

func TestWalls(t *testing.T) {
	status := "Name:\tdoctor\nSeccomp:\t0\nSeccomp_filters:\t0\n"
	good := map[string]string{
		"/proc/self/status":                      status,
		"/proc/sys/kernel/seccomp/actions_avail": "kill_process kill_thread trap errno user_notif trace log allow\n",
		"/proc/sys/abi/vsyscall32":               "1\n",
		"/sys/kernel/security/lsm":               "lockdown,capability,landlock,yama,apparmor",
	}
	abi := func(v int, err error) func() (int, error) { return func() (int, error) { return v, err } }
	tests := []struct {
		name     string
		files    map[string]string
		arch     string
		landlock func() (int, error)
		want     map[string]want
	}{
		{"everything there", good, "amd64", abi(7, nil), map[string]want{
			"landlock":             {StatusOK, "Landlock ABI 7", ""},
			"seccomp":              {StatusOK, "runs unfiltered", ""},
			"seccomp_kill_process": {StatusOK, "SECCOMP_RET_KILL_PROCESS supported", ""},
			"i386_emulation":       {StatusInfo, "present (CONFIG_IA32_EMULATION)", ""},
		}},
		{"landlock missing from the LSM list", merge(good, map[string]string{"/sys/kernel/security/lsm": "lockdown,capability,yama,apparmor\n"}), "amd64", abi(0, unix.EOPNOTSUPP), map[string]want{
			"landlock": {StatusWarn, "no Landlock", "lsm=landlock,lockdown,capability,yama,apparmor"},
		}},
		{"landlock disabled, LSM list unreadable", merge(good, map[string]string{"/sys/kernel/security/lsm": ""}), "amd64", abi(0, unix.EOPNOTSUPP), map[string]want{
			"landlock": {StatusWarn, "not readable", "built in but disabled"},
		}},
		{"landlock not built", good, "amd64", abi(0, unix.ENOSYS), map[string]want{
			"landlock": {StatusWarn, "function not implemented", "CONFIG_SECURITY_LANDLOCK=y"},
		}},
		{"inside a container's filter", merge(good, map[string]string{"/proc/self/status": "Seccomp:\t2\nSeccomp_filters:\t1\n"}), "amd64", abi(3, nil), map[string]want{
			"seccomp":  {StatusOK, "under 1 filter(s)", ""},
			"landlock": {StatusOK, "Landlock ABI 3", ""},
		}},
		{"kernel without seccomp", merge(good, map[string]string{"/proc/self/status": "Name:\tdoctor\n"}), "amd64", abi(7, nil), map[string]want{
			"seccomp": {StatusFail, "no Seccomp field", "CONFIG_SECCOMP_FILTER=y"},
		}},
		{"no kill_process action", merge(good, map[string]string{"/proc/sys/kernel/seccomp/actions_avail": "kill trap errno trace allow\n"}), "amd64", abi(7, nil), map[string]want{
			"seccomp_kill_process": {StatusFail, "lack kill_process", "4.14 or later"},
		}},
		{"i386 disabled at boot", merge(good, map[string]string{"/proc/cmdline": "root=/dev/vda ia32_emulation=0\n"}), "amd64", abi(7, nil), map[string]want{
			"i386_emulation": {StatusInfo, "disabled at boot", ""},
		}},
		{"arm64", good, "arm64", abi(7, nil), map[string]want{
			"i386_emulation": {StatusInfo, "not applicable on arm64", ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Host{Root: fakeRoot(t, tt.files), Arch: tt.arch, LandlockABI: tt.landlock}
			expect(t, h.walls(h.landlockABI()), tt.want)
		})
	}
}
