package linuxsandbox

import (
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// initHooked is set by MaybeInit so the backend knows re-exec will work.
var initHooked bool

// The sandbox init starts from this package's init(), before the
// packages a large binary initializes later (NATS, Prometheus,
// OpenTelemetry...): in agent-runner that start-up cost dominated a
// sandbox job (95 ms per job when the init waited for main).
func init() {
	if len(os.Args) > 0 && os.Args[0] == initArg0 {
		runInit()
	}
	if len(os.Args) > 0 && os.Args[0] == holderArg0 {
		holdUserns()
	}
}

// MaybeInit must be called first thing in main (and in TestMain of test
// binaries that run linux_sandbox jobs): it records that this binary can
// act as the sandbox init. (A process started as the init never gets here:
// it runs from init and exits.)
func MaybeInit() {
	initHooked = true
	if len(os.Args) == 0 || os.Args[0] != initArg0 {
		return
	}
	runInit()
}

func runInit() {
	// The config pipe and the control socket must not reach the
	// workload: a workload holding fd 4 could forge exits or start
	// processes outside its confinement's bookkeeping.
	unix.CloseOnExec(3)
	unix.CloseOnExec(4)
	unix.CloseOnExec(layerFD)
	if res := sandboxInit(); res.Error != "" {
		json.NewEncoder(os.NewFile(ctlFD, "control")).Encode(res)
	}
	os.Exit(0)
}

func fail(stage string, err error) initResult {
	return initResult{Stage: stage, Error: err.Error()}
}

// sandboxInit runs inside the new namespaces as pid 1. It stays on one OS
// thread: capabilities are per thread, and the workload is forked from the
// thread that dropped them.
func sandboxInit() initResult {
	runtime.LockOSThread()
	var cfg initConfig
	if err := json.NewDecoder(os.NewFile(3, "config")).Decode(&cfg); err != nil {
		return fail("config", err)
	}
	if err := buildRoot(cfg); err != nil {
		if ce := (*cowError)(nil); errors.As(err, &ce) {
			return fail(cowStage, err)
		}
		if ie := (*imageRootError)(nil); errors.As(err, &ie) {
			return fail(imageRootStage, err)
		}
		return fail("mounts", err)
	}
	if !cfg.HostNetwork {
		if err := loopbackUp(); err != nil {
			return fail("network", err)
		}
	}
	if cfg.EgressSocket != "" {
		if err := forwardEgress(); err != nil {
			return fail("egress", err)
		}
	}
	_ = unix.Sethostname([]byte("sandbox"))
	if err := limitKernelCounts(); err != nil {
		return fail("limits", err)
	}
	var keep []int
	if cfg.Image && cfg.UID == 0 {
		keep = imageCaps
	}
	if err := dropBoundingSet(keep); err != nil {
		return fail("capabilities", err)
	}
	openOOMAdj() // before Landlock closes /proc to writes
	if err := restrictLandlock(cfg); err != nil {
		return fail("landlock", err)
	}
	if err := loadSeccomp(); err != nil {
		return fail("seccomp", err)
	}
	rec, err := recordExecs(cfg)
	if err != nil {
		return fail("exec-recorder", err)
	}
	return serveSandbox(cfg, rec)
}

// closeExtraFDs marks every descriptor above stderr close-on-exec, so
// nothing the init holds (its pipes, runtime or library descriptors)
// reaches the workload.
func closeExtraFDs() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
