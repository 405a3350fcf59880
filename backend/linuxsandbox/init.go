package linuxsandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

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
	// The config and result pipes must not reach the workload: a workload
	// holding fd 4 could forge its own exit status.
	unix.CloseOnExec(3)
	unix.CloseOnExec(4)
	unix.CloseOnExec(layerFD)
	res := sandboxInit()
	json.NewEncoder(os.NewFile(4, "result")).Encode(res)
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
	if err := dropBoundingSet(); err != nil {
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
	if cfg.Control {
		return serveSandbox(cfg, rec)
	}
	res := runWorkload(cfg)
	res.ExecDenials, res.ExecDenialsTotal = rec.take(-1)
	return res
}

// runWorkload starts the workload as the sandbox uid and reaps every
// process until it exits; then whatever it left behind is killed.
func runWorkload(cfg initConfig) initResult {
	dir := filepath.Join(WorkspaceMount, cfg.Cwd)
	path := cfg.Argv[0]
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	attr := &syscall.ProcAttr{
		Dir:   dir,
		Env:   cfg.Env,
		Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{
			Setpgid:    true,
			Credential: &syscall.Credential{Uid: uint32(cfg.UID), Gid: uint32(cfg.GID), NoSetGroups: cfg.UID == 0},
		},
	}
	if cfg.TTY {
		attr.Sys.Setpgid = false
		attr.Sys.Setsid, attr.Sys.Setctty, attr.Sys.Ctty = true, true, 0
	}
	closeExtraFDs()
	pid, err := forkExecKillable(path, cfg.Argv, attr)
	if err != nil {
		return fail("exec", fmt.Errorf("%s: %w", cfg.Argv[0], err))
	}
	go func() {
		for range sigs {
			// Forward TERM to every process in the sandbox.
			_ = unix.Kill(-1, unix.SIGTERM)
		}
	}()
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fail("wait", err)
		}
		if got != pid {
			continue // an orphan adopted by pid 1
		}
		_ = unix.Kill(-1, unix.SIGKILL)
		if ws.Signaled() {
			return initResult{Signal: int(ws.Signal())}
		}
		code := ws.ExitStatus()
		return initResult{ExitCode: &code}
	}
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
