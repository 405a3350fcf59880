package linuxsandbox

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// ctlFD is a kept sandbox init's control socket (control.go).
const ctlFD = 4

// request is one control message with the descriptors it carried.
type request struct {
	req ctlRequest
	fds []int
}

// serveSandbox is the init after its setup: it reports ready, then
// starts each exec the runner asks for, confined as the sandbox's
// workload (its own process group, the sandbox uid, no privileges,
// this process's seccomp filter and Landlock domain), reports each
// exit, answers each connect to a loopback port (ports.go), reaps orphans, and when the runner's end closes kills every
// process of the sandbox and returns. It runs on the locked thread that
// dropped the capabilities: every fork happens here. A one-shot run's
// workload, its first request, is served by runFinal. Each exit report
// carries the execs rec saw refused in the exec's process group.
func serveSandbox(cfg initConfig, rec *execRecorder) initResult {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	if err := ctlSend(ctlFD, ctlReply{Op: "ready"}); err != nil {
		return fail("control", err)
	}
	// Nothing runs yet: the first request is read here, on this thread,
	// so a one-shot workload starts with no goroutine in between.
	buf := make([]byte, ctlMaxMessage)
	var first request
	fds, err := ctlReceive(ctlFD, buf, &first.req)
	if err != nil {
		_ = unix.Kill(-1, unix.SIGKILL)
		return initResult{}
	}
	first.fds = fds
	if first.req.Op == "exec" && first.req.Final {
		return runFinal(cfg, first, sigs, buf, rec)
	}
	reqs := make(chan request, 1)
	reqs <- first
	go func() {
		for {
			var r request
			fds, err := ctlReceive(ctlFD, buf, &r.req)
			if err != nil {
				close(reqs)
				return
			}
			r.fds = fds
			reqs <- r
		}
	}()
	execs := map[int]uint64{} // pid (= pgid) -> exec id
	groups := map[uint64]int{}
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				_ = unix.Kill(-1, unix.SIGKILL)
				return initResult{}
			}
			switch r.req.Op {
			case "exec":
				pid, err := startExec(cfg, r.req, r.fds)
				closeAll(r.fds)
				if err != nil {
					ctlSend(ctlFD, ctlReply{Op: "error", ID: r.req.ID, Error: err.Error()})
					continue
				}
				execs[pid], groups[r.req.ID] = r.req.ID, pid
				ctlSend(ctlFD, ctlReply{Op: "started", ID: r.req.ID, Pid: pid})
			case "signal":
				closeAll(r.fds)
				if pid, ok := groups[r.req.ID]; ok {
					_ = unix.Kill(-pid, unix.Signal(r.req.Sig))
				}
			case "connect":
				// Off this thread: a connect may wait on a full
				// backlog, and execs and signals must not.
				closeAll(r.fds)
				go connectLoopback(r.req)
			default:
				closeAll(r.fds)
			}
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				// Forward TERM to every process in the sandbox.
				_ = unix.Kill(-1, unix.SIGTERM)
				continue
			}
			reapExecs(execs, groups, rec)
		}
	}
}

// reapExecs reaps every child that has ended and reports the execs among
// them, each with the refused execs of its process group (rec); the
// others are orphans pid 1 adopted.
func reapExecs(execs map[int]uint64, groups map[uint64]int, rec *execRecorder) {
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, &ru)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		id, ok := execs[pid]
		if !ok {
			continue
		}
		delete(execs, pid)
		delete(groups, id)
		rep := exitReply(id, ws, ru)
		rep.ExecDenials, rep.ExecDenialsTotal = rec.take(pid)
		ctlSend(ctlFD, rep)
	}
}

// exitReply reports how exec id ended.
func exitReply(id uint64, ws unix.WaitStatus, ru unix.Rusage) ctlReply {
	rep := ctlReply{Op: "exit", ID: id, CPUNanos: ru.Utime.Nano() + ru.Stime.Nano()}
	if ws.Signaled() {
		rep.Signal = int(ws.Signal())
	} else {
		code := ws.ExitStatus()
		rep.ExitCode = &code
	}
	return rep
}

// runFinal serves a one-shot run: it starts the workload (r, the first
// request) and waits for it on this thread, reaping orphans, while a
// goroutine sends the runner's signals to every process of the sandbox;
// when the workload exits it kills them all, reports the exit with every
// exec rec saw refused, and returns (the init exits, as pid 1 of a
// one-shot run always did).
func runFinal(cfg initConfig, r request, sigs chan os.Signal, buf []byte, rec *execRecorder) initResult {
	pid, err := startExec(cfg, r.req, r.fds)
	closeAll(r.fds)
	if err != nil {
		ctlSend(ctlFD, ctlReply{Op: "error", ID: r.req.ID, Error: err.Error()})
		return initResult{}
	}
	ctlSend(ctlFD, ctlReply{Op: "started", ID: r.req.ID, Pid: pid})
	go func() {
		for {
			var req ctlRequest
			fds, err := ctlReceive(ctlFD, buf, &req)
			closeAll(fds)
			if err != nil {
				_ = unix.Kill(-1, unix.SIGKILL)
				return
			}
			if req.Op == "signal" && req.ID == r.req.ID {
				_ = unix.Kill(-1, unix.Signal(req.Sig))
			}
		}
	}()
	go func() {
		for sig := range sigs {
			if sig != syscall.SIGCHLD {
				_ = unix.Kill(-1, unix.SIGTERM)
			}
		}
	}()
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		got, err := unix.Wait4(-1, &ws, 0, &ru)
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
		rep := exitReply(r.req.ID, ws, ru)
		rep.ExecDenials, rep.ExecDenialsTotal = rec.take(-1)
		ctlSend(ctlFD, rep)
		return initResult{}
	}
}

// startExec forks one exec with fds as its stdin, stdout and stderr.
func startExec(cfg initConfig, req ctlRequest, fds []int) (int, error) {
	if len(fds) != 3 || len(req.Argv) == 0 {
		return 0, fmt.Errorf("an exec needs an argv and three descriptors")
	}
	dir := filepath.Join(WorkspaceMount, req.Cwd)
	if filepath.IsAbs(req.Cwd) {
		dir = req.Cwd // an image's working directory, set by the runner
	}
	path := req.Argv[0]
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	attr := &syscall.ProcAttr{
		Dir:   dir,
		Env:   req.Env,
		Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])},
		Sys: &syscall.SysProcAttr{
			Setpgid:    true,
			Credential: &syscall.Credential{Uid: uint32(cfg.UID), Gid: uint32(cfg.GID), NoSetGroups: cfg.UID == 0},
		},
	}
	if req.Terminal {
		attr.Sys.Setpgid = false
		attr.Sys.Setsid, attr.Sys.Setctty, attr.Sys.Ctty = true, true, 0
	}
	closeExtraFDs()
	pid, err := forkExecKillable(path, req.Argv, attr)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", req.Argv[0], err)
	}
	return pid, nil
}
