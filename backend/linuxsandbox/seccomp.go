package linuxsandbox

import (
	"fmt"
	"sort"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend/syscallpolicy"
)

// The sandbox's seccomp filter is an allow-list. In order, it:
//
//  1. kills the process for any syscall made through a non-native ABI
//     (i386 `int $0x80` from a 64-bit process, x32 numbers with the
//     0x40000000 bit): their numbers mean other syscalls and a filter
//     written for the native table cannot judge them;
//  2. allows the groups in allowedSyscalls, some only for harmless
//     arguments (clone and unshare without namespace flags, socket for
//     four address families, the usual personality values);
//  3. refuses the groups in deniedSyscalls with EPERM (they are known and
//     refused on purpose, so programs see "not permitted");
//  4. answers every other syscall ENOSYS: ones this table lists nowhere
//     and ones added to the kernel after it was written (open_tree_attr,
//     ...), so a new kernel never widens the sandbox. libc and language
//     runtimes treat ENOSYS as "use the older call" (clone3 -> clone).
//
// docs/backends.md repeats the groups and their reasons.

// The allow-list's tables are package syscallpolicy's (shared with the
// oci backend); these names keep the filter's code as it reads.
type syscallGroup = syscallpolicy.Group

var (
	allowedSyscalls    = syscallpolicy.Allowed
	deniedSyscalls     = syscallpolicy.Denied
	enosysSyscalls     = syscallpolicy.ENOSYS
	argCheckedSyscalls = syscallpolicy.ArgChecked
	socketFamilies     = syscallpolicy.SocketFamilies
	personalities      = syscallpolicy.Personalities
)

const nsFlags = syscallpolicy.NamespaceFlags

// Seccomp return values.
const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retKill  = unix.SECCOMP_RET_KILL_PROCESS
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNoSys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	retNoAF  = unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT)
)

// Offsets into struct seccomp_data, and the BPF opcodes the filter uses.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // args[i] at 16+8*i; the low 32 bits come first on little-endian

	opLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	opJeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	opJset   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	opRet    = unix.BPF_RET | unix.BPF_K

	x32SyscallBit = 0x40000000
)

// seccompProgram assembles the filter for the native architecture.
func seccompProgram() ([]unix.SockFilter, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	nr := func(name string) (uint32, error) {
		n, ok := info.SyscallNames[name]
		if !ok {
			return 0, fmt.Errorf("seccomp: syscall %q unknown on %s", name, info.Name)
		}
		return uint32(n), nil
	}
	p := []unix.SockFilter{
		stmt(opLdAbsW, offArch),
		jump(opJeq, uint32(info.ID), 1, 0),
		stmt(opRet, retKill),
		stmt(opLdAbsW, offNr),
	}
	if info.ID == arch.X86_64.ID {
		p = append(p, jump(opJset, x32SyscallBit, 0, 1), stmt(opRet, retKill))
	}
	verdicts := map[uint32]uint32{}
	for _, list := range []struct {
		groups []syscallGroup
		ret    uint32
	}{{allowedSyscalls, retAllow}, {deniedSyscalls, retEPERM}} {
		for _, g := range list.groups {
			for _, name := range g.Names {
				n, err := nr(name)
				if err != nil {
					return nil, err
				}
				verdicts[n] = list.ret
			}
		}
	}
	// Sorted, so the program is the same on every run.
	nums := make([]uint32, 0, len(verdicts))
	for n := range verdicts {
		nums = append(nums, n)
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	for _, n := range nums {
		p = append(p, jump(opJeq, n, 0, 1), stmt(opRet, verdicts[n]))
	}
	for _, name := range argCheckedSyscalls[:2] {
		n, err := nr(name)
		if err != nil {
			return nil, err
		}
		// The kernel reads only the low 32 bits of clone's flags; every
		// namespace flag is among them.
		p = append(p,
			jump(opJeq, n, 0, 4),
			stmt(opLdAbsW, offArg0),
			jump(opJset, nsFlags, 1, 0),
			stmt(opRet, retAllow),
			stmt(opRet, retEPERM),
		)
	}
	for _, c := range []struct {
		name    string
		allowed []uint32
		deny    uint32
	}{{"socket", socketFamilies, retNoAF}, {"personality", personalities, retEPERM}} {
		n, err := nr(c.name)
		if err != nil {
			return nil, err
		}
		// jeq nr; ld arg0; (jeq v -> allow)...; ret deny; ret allow; ld nr
		k := len(c.allowed)
		p = append(p, jump(opJeq, n, 0, uint8(k+3)), stmt(opLdAbsW, offArg0))
		for i, v := range c.allowed {
			p = append(p, jump(opJeq, v, uint8(k-i), 0))
		}
		p = append(p, stmt(opRet, c.deny), stmt(opRet, retAllow))
	}
	p = append(p, stmt(opRet, retNoSys))
	if len(p) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: program of %d instructions is too long", len(p))
	}
	return p, nil
}

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// loadSeccomp sets no_new_privs and installs the filter on every thread
// of this process; everything it starts inherits it.
func loadSeccomp() error {
	prog, err := seccompProgram()
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("load seccomp filter: %w", e)
	}
	return nil
}
