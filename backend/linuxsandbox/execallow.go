package linuxsandbox

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// The exec allow-list (backend.Spec.Executables, policy.exec_scope
// every_process) is Landlock's EXECUTE right: restrictLandlock grants it
// on no directory, only on these files. The kernel checks it on the file
// execve opens and on the ELF interpreter it loads, so a dynamically
// linked program needs its PT_INTERP too; shared libraries are mmapped,
// not executed, and keep loading. A script's #! interpreter is opened
// the same way and is executable only when it is itself on the list.
//
// The ELF interpreter can be run as a program too (ld.so PROGRAM), and
// it maps PROGRAM rather than executing it, which Landlock does not see:
// so the writable places are made noexec as well (noExecWritable), and
// nothing written there is mapped executable, library or program; and
// the view's program directories are not readable beyond the listed
// files (execread.go), so the interpreter cannot load the view's shells.
// Programs elsewhere in the view stay reachable that way
// (docs/threat-model.md).

// execAllowAvailable refuses an allow-list on a kernel without Landlock
// (EXECUTE is in every ABI from 1): it would run unenforced.
func execAllowAvailable(executables []string) error {
	if executables == nil || landlockABI() > 0 {
		return nil
	}
	return job.Errorf(job.CodeBackendUnavail, "linux_sandbox cannot confine every exec (policy.exec_scope every_process): this kernel has no Landlock").
		With("reason", "landlock unavailable")
}

// execAllowRule is the Landlock rule of an allow-list, resolved inside
// the sandbox: EXECUTE (with read) on each file and on the interpreter
// each ELF file names. A listed file the sandbox does not have grants
// nothing. A pinned file is granted only if it is still the file whose
// digest the policy checked: the rule is added from the descriptor whose
// identity was compared (addPathRule), so the digest holds for the very
// file the workload may execute.
func execAllowRule(executables []string, pinned map[string]backend.FileIdentity) (pathRule, error) {
	if landlockABI() == 0 {
		return pathRule{}, errors.New("exec allow-list without Landlock")
	}
	var files []string
	for _, p := range executables {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		interp, err := elfInterpreter(p)
		if err != nil {
			return pathRule{}, fmt.Errorf("exec allow-list: %s: %w", p, err)
		}
		files = append(files, p)
		if interp != "" {
			files = append(files, interp)
		}
	}
	slices.Sort(files)
	return pathRule{access: landlock.AccessFSSet(llsys.AccessFSExecute | llsys.AccessFSReadFile), paths: slices.Compact(files), pinned: pinned}, nil
}

// elfInterpreter returns the PT_INTERP of the ELF file at path, "" for a
// static ELF file or one that is not ELF (a script).
func elfInterpreter(path string) (string, error) {
	r, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	magic := make([]byte, len(elf.ELFMAG))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != elf.ELFMAG {
		return "", nil
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return "", err
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("PT_INTERP: %w", err)
		}
		interp := strings.TrimRight(string(b), "\x00")
		if !filepath.IsAbs(interp) {
			return "", fmt.Errorf("PT_INTERP %q is not absolute", interp)
		}
		return interp, nil
	}
	return "", nil
}

// noExecWritable marks each writable mount of the sandbox (the
// workspace, /tmp, /dev/shm, writable binds) noexec, the mount alone
// (a read-only bind below the workspace keeps its native libraries).
func noExecWritable(dirs []string) error {
	for _, d := range dirs {
		var st unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, d, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
			return fmt.Errorf("exec allow-list: %s: %w", d, err)
		}
		if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 || st.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
			return fmt.Errorf("exec allow-list: writable %s is not a mount of its own, so it cannot be made noexec", d)
		}
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOEXEC}
		if err := unix.MountSetattr(unix.AT_FDCWD, d, unix.AT_SYMLINK_NOFOLLOW, &attr); err != nil {
			return fmt.Errorf("exec allow-list: noexec %s: %w", d, err)
		}
	}
	return nil
}
