package linuxsandbox

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
)

// A root runner gives every concurrent sandbox its own host uid/gid
// range: slot k maps the sandbox's ids 0..65535 to host ids
// idPoolBase+k*idRange and up, and the slot's first host uid owns the
// sandbox's user namespace. The kernel keeps per-uid accounts (process
// counts, keyrings and their quotas, inotify instances, nested
// namespaces) by host uid and by namespace owner, so two jobs never share
// one, and one job's keys or exhaustion are invisible to the next.
//
// Slots are held with flock on files in idSlotDir, so separate runner
// processes on one host (serve, worker, a CLI run) never pick the same
// range; a lock dies with its holder.
const (
	idPoolBase  = 1_000_000
	idRange     = 65536
	idPoolSlots = 1024
	workloadID  = 1000
)

// idSlotDir holds one lock file per slot; it must belong to root.
var idSlotDir = "/run/agent-runner/sandbox-ids"

// idSlot is a host id range held for one sandbox run.
type idSlot struct {
	base int
	lock *os.File
}

// release frees the slot for the next sandbox.
func (s *idSlot) release() { s.lock.Close() }

// acquireSlot holds a free slot, starting from a random one so that
// processes do not queue on the same files and a range is rarely reused
// at once.
func acquireSlot() (*idSlot, error) {
	if err := slotDirReady(idSlotDir); err != nil {
		return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot prepare the sandbox id pool").With("path", idSlotDir)
	}
	start := rand.IntN(idPoolSlots)
	for i := range idPoolSlots {
		k := (start + i) % idPoolSlots
		f, err := os.OpenFile(filepath.Join(idSlotDir, strconv.Itoa(k)), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot open a sandbox id slot")
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			return nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot lock a sandbox id slot")
		}
		return &idSlot{base: idPoolBase + k*idRange, lock: f}, nil
	}
	return nil, job.Errorf(job.CodeBackendUnavail, "all %d sandbox id ranges are in use", idPoolSlots)
}

// slotDirReady creates dir (0700) and checks that it is a directory owned
// by root that others cannot write: anyone who could plant or hold its
// lock files could stall every sandbox.
func slotDirReady(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s must be a directory owned by root and writable only by it", dir)
	}
	return nil
}

// startOwnedBy starts cmd, whose clone creates the sandbox's user
// namespace, from a thread whose effective uid is owner, so the namespace
// belongs to owner rather than to root. The thread keeps its effective
// capabilities (raised again after the uid change) to write the id maps.
// It stays locked and alive until the returned func is called: the
// init's Pdeathsig fires when the thread that started it exits. After
// that the goroutine returns still locked, and the runtime discards the
// thread with its changed credentials.
func startOwnedBy(cmd interface{ Start() error }, owner int) (func(), error) {
	errc := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		errc <- startAs(cmd, owner)
		<-finished
	}()
	if err := <-errc; err != nil {
		close(finished)
		return nil, err
	}
	return func() { close(finished) }, nil
}

// startAs changes only this thread's effective uid (the raw syscall, not
// Go's all-threads setresuid) and starts cmd.
func startAs(cmd interface{ Start() error }, euid int) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(euid), ^uintptr(0)); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	// With the real uid still 0 the permitted set survives the change;
	// the effective set was cleared and is raised from it.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for i := range data {
		data[i].Effective = data[i].Permitted
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return cmd.Start()
}
