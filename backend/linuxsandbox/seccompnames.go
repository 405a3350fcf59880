package linuxsandbox

// SyscallRules is the sandbox's seccomp allow-list by syscall name, for
// a backend that hands it to another enforcer (an OCI runtime's
// libseccomp) instead of loading this package's filter: the same
// groups, in the same verdicts (seccomp.go says why each is there).
// Every syscall named in neither list, and every one whose arguments
// the rules below do not allow, gets ENOSYS.
type SyscallRules struct {
	// Allowed are allowed whatever their arguments.
	Allowed []string
	// Denied are refused with EPERM.
	Denied []string
	// NamespaceFlags are the clone and unshare flags that create
	// namespaces: those two are allowed only with none of them set.
	NamespaceFlags uint64
	// SocketFamilies are the address families socket(2) may create;
	// another family is refused with EAFNOSUPPORT.
	SocketFamilies []uint32
	// Personalities are the personality(2) values allowed.
	Personalities []uint32
}

// Syscalls returns the allow-list as SyscallRules (fresh slices).
func Syscalls() SyscallRules {
	names := func(groups []syscallGroup) []string {
		var out []string
		for _, g := range groups {
			out = append(out, g.names...)
		}
		return out
	}
	return SyscallRules{
		Allowed:        names(allowedSyscalls),
		Denied:         names(deniedSyscalls),
		NamespaceFlags: nsFlags,
		SocketFamilies: append([]uint32{}, socketFamilies...),
		Personalities:  append([]uint32{}, personalities...),
	}
}
