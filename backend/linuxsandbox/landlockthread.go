package linuxsandbox

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
)

// The sandbox's Landlock domain is put on the init's locked thread only,
// the one that forks every workload process, which inherits it. The
// init's other threads (signal forwarding, the egress forwarder, the
// exec recorder) stay outside it, still bounded by the mounts, the
// namespaces and seccomp: Landlock lets a thread read a process's
// memory and /proc links only within its own domain or one nested in
// it, and a domain put on every thread is a separate domain per thread
// (before Landlock ABI 8), so a recorder thread inside one could not
// read the workload's exec path (execnotify.go).

// pathRule grants access beneath each of paths (on a file, only the
// rights a file can take). A path in pinned is granted only if the file
// it opens is still of that identity.
type pathRule struct {
	access landlock.AccessFSSet
	paths  []string
	pinned map[string]backend.FileIdentity
}

// handledFS are the filesystem rights Landlock ABI abi knows, all of
// which the sandbox's ruleset handles (landlock.V7, best effort).
func handledFS(abi int) landlock.AccessFSSet {
	h := landlock.AccessFSSet(llsys.AccessFSMakeSym<<1 - 1) // ABI 1: execute .. make_sym
	if abi >= 2 {
		h |= llsys.AccessFSRefer
	}
	if abi >= 3 {
		h |= llsys.AccessFSTruncate
	}
	if abi >= 5 {
		h |= llsys.AccessFSIoctlDev
	}
	return h
}

// restrictThread puts this thread in a new Landlock domain that handles
// every filesystem right the kernel knows and grants only rules. It
// sets no_new_privs on the thread. Without Landlock it does nothing.
func restrictThread(rules []pathRule) error {
	abi := landlockABI()
	if abi == 0 {
		return nil
	}
	handled := handledFS(abi)
	fd, err := llsys.LandlockCreateRuleset(&llsys.RulesetAttr{HandledAccessFS: uint64(handled)}, 0)
	if err != nil {
		return fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	defer unix.Close(fd)
	for _, r := range rules {
		access := r.access & handled
		if access == 0 {
			continue
		}
		for _, p := range r.paths {
			want, pinned := r.pinned[p]
			if err := addPathRule(fd, p, access, pinned, want); err != nil {
				return err
			}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := llsys.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// addPathRule grants access on path, checking first, when pinned, that
// the file opened is of identity want.
func addPathRule(ruleset int, path string, access landlock.AccessFSSet, pinned bool, want backend.FileIdentity) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("landlock rule for %s: %w", path, err)
	}
	defer unix.Close(fd)
	if pinned {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("pinned %s: %w", path, err)
		}
		if got := fileIdentity(&st); got != want {
			return fmt.Errorf("pinned %s is no longer the file whose sha256 the policy checked (%+v, now %+v)", path, want, got)
		}
	}
	err = llsys.LandlockAddPathBeneathRule(ruleset, &llsys.PathBeneathAttr{AllowedAccess: uint64(access), ParentFd: fd}, 0)
	if err != nil {
		return fmt.Errorf("landlock rule for %s (%v): %w", path, access, err)
	}
	return nil
}

// fileIdentity is backend.FileIdentity of st.
func fileIdentity(st *unix.Stat_t) backend.FileIdentity {
	return backend.FileIdentity{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano()}
}
