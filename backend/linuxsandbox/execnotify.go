package linuxsandbox

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// The exec recorder: Landlock refuses a denied exec (execdeny.go,
// execallow.go) but tells no one, so the init also installs a seccomp
// filter that hands every execve and execveat of the sandbox to it as a
// user notification. The init reads the program's path (and argv[0])
// from the caller's memory, resolves it against the caller's cwd or
// dirfd through /proc/<pid>/, judges it as the kernel will (a denied
// file, a file off the allow-list, or a script whose #! interpreter is
// one), records a denial, and always answers CONTINUE: the kernel then
// runs the exec as if nothing had looked, and Landlock decides. A
// process that changes the path between the two (TOCTOU) changes only
// the record, never what is enforced.
//
// The notifications are answered by a goroutine of the init, which runs
// outside the Landlock domain of the init's locked thread (Landlock lets
// only a process's own domain or an enclosing one read its memory;
// landlockthread.go), while that locked thread may be inside vfork for
// the very exec in question (Go's ForkExec): the init keeps spare Ps
// for the goroutine (GOMAXPROCS of at least minProcs, fixed), or the two
// would wait for each other.

// execGCPause stops garbage collection until the function it returns
// is called, for a fork of the init's locked thread: Go forks with vfork,
// which holds the thread (and its P) until the child's exec is done; that
// exec waits for the recorder's goroutine, and a collection that began
// meanwhile would stop the world, the goroutine with it, and wait for the
// held P forever. SetGCPercent(-1) returns only once no collection runs.
func execGCPause() func() {
	if !recording {
		return func() {}
	}
	old := debug.SetGCPercent(-1)
	return func() { debug.SetGCPercent(old) }
}

// recording is set in an init that records execs.
var recording bool

// minProcs is the init's least GOMAXPROCS while it records execs: the
// locked thread, the recorder, and room for the runtime's own work.
const minProcs = 4

// seccompNotif is struct seccomp_notif.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

// seccompNotifResp is struct seccomp_notif_resp.
type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// notifyProgram passes every syscall but execve and execveat of the
// native ABI, which it hands to the listener (the sandbox's main filter
// kills foreign ABIs).
func notifyProgram() ([]unix.SockFilter, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	execve, ok1 := info.SyscallNames["execve"]
	execveat, ok2 := info.SyscallNames["execveat"]
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("seccomp: execve or execveat unknown on %s", info.Name)
	}
	return []unix.SockFilter{
		stmt(opLdAbsW, offArch),
		jump(opJeq, uint32(info.ID), 0, 4),
		stmt(opLdAbsW, offNr),
		jump(opJeq, uint32(execve), 2, 0),
		jump(opJeq, uint32(execveat), 1, 0),
		stmt(opRet, retAllow),
		stmt(opRet, unix.SECCOMP_RET_USER_NOTIF),
	}, nil
}

// recordExecs starts the exec recorder for cfg, or returns nil when the
// job denies nothing. It must run after loadSeccomp (no_new_privs).
func recordExecs(cfg initConfig) (*execRecorder, error) {
	if cfg.DeniedPrograms == nil && cfg.Executables == nil {
		return nil, nil
	}
	rec := newExecRecorder(newExecJudge(cfg))
	prog, err := notifyProgram()
	if err != nil {
		return nil, err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	flags := unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH
	fd, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, uintptr(flags), uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return nil, fmt.Errorf("load the exec notification filter: %w", e)
	}
	unix.CloseOnExec(int(fd))
	// Set, not left to the runtime, which would lower it to the job's
	// CPU limit once the init is in its cgroup (one CPU: one P, held by
	// the locked thread in vfork, and the exec it waits for never
	// answered).
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), minProcs))
	recording = true
	go rec.serve(int(fd))
	return rec, nil
}

// serve answers notifications on the listener fd until it fails (the
// init is ending).
func (r *execRecorder) serve(fd int) {
	for {
		var n seccompNotif
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n)))
		switch e {
		case 0:
		case unix.EINTR, unix.ENOENT:
			continue // interrupted, or the caller died before it was read
		default:
			return
		}
		// The denial is recorded before the answer: once answered, the
		// caller's exec fails at once and the workload may exit, and its
		// exit report (take) must already hold the denial.
		if d, denied := r.look(fd, &n); denied {
			r.record(d)
		}
		resp := seccompNotifResp{id: n.id, flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	}
}

// look reads and judges one exec; denied is false when it will run or
// cannot be read.
func (r *execRecorder) look(fd int, n *seccompNotif) (groupDenial, bool) {
	pid := int(n.pid)
	mem, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/mem", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return groupDenial{}, false
	}
	defer unix.Close(mem)
	dirfd, pathAt, argvAt, emptyPath := unix.AT_FDCWD, n.args[0], n.args[1], false
	if n.nr != int32(unix.SYS_EXECVE) {
		dirfd, pathAt, argvAt = int(int32(n.args[0])), n.args[1], n.args[2]
		emptyPath = n.args[4]&unix.AT_EMPTY_PATH != 0
	}
	name, err := readString(mem, pathAt, unix.PathMax)
	if err != nil {
		return groupDenial{}, false
	}
	var argv0 string
	var ptr [8]byte
	if n, err := unix.Pread(mem, ptr[:], int64(argvAt)); err == nil && n == len(ptr) {
		if p := binary.NativeEndian.Uint64(ptr[:]); p != 0 {
			argv0, _ = readString(mem, p, 256)
		}
	}
	path, ok := callerPath(pid, dirfd, name, emptyPath)
	// The notification must still be the caller's: its memory was read
	// by pid, which another process may hold once it is gone.
	id := n.id
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id))); e != 0 || !ok {
		return groupDenial{}, false
	}
	interp, denied := r.judge.denied(path)
	if !denied {
		return groupDenial{}, false
	}
	d := groupDenial{pgid: processGroup(pid)}
	d.Path, d.Interpreter, d.Argv0, d.PID, d.Time = path, interp, argv0, pid, time.Now().UTC()
	return d, true
}

// readString reads a NUL-terminated string of at most max bytes at addr
// of the process whose memory the descriptor mem is.
func readString(mem int, addr uint64, max int) (string, error) {
	var b []byte
	buf := make([]byte, 256)
	for len(b) < max {
		n, err := unix.Pread(mem, buf, int64(addr)+int64(len(b)))
		if n <= 0 {
			if err == nil {
				err = fmt.Errorf("no string at %#x", addr)
			}
			return "", err
		}
		if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
			return string(append(b, buf[:i]...)), nil
		}
		b = append(b, buf[:n]...)
	}
	return "", fmt.Errorf("string at %#x is longer than %d bytes", addr, max)
}

// callerPath is the absolute path, in the sandbox, of the program an
// exec names: name itself, or name below the caller's cwd or dirfd, or
// dirfd itself (AT_EMPTY_PATH).
func callerPath(pid, dirfd int, name string, emptyPath bool) (string, bool) {
	if filepath.IsAbs(name) {
		return filepath.Clean(name), true
	}
	proc := "/proc/" + strconv.Itoa(pid)
	base := proc + "/cwd"
	if dirfd != unix.AT_FDCWD {
		base = proc + "/fd/" + strconv.Itoa(dirfd)
	}
	dir, err := os.Readlink(base)
	if err != nil || !filepath.IsAbs(dir) {
		return "", false
	}
	if name == "" && emptyPath {
		return dir, true
	}
	return filepath.Join(dir, name), true
}

// processGroup is pid's process group, 0 when it cannot be read.
func processGroup(pid int) int { return statField(pid, 2) }
