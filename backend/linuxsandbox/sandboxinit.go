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

// serveSandbox is a kept sandbox's init after its setup: it reports
// ready, then starts each exec the runner asks for, confined as a
// one-shot workload is (runWorkload: its own process group, the sandbox
// uid, no privileges, this process's seccomp filter and Landlock
// domain), reports each exit, reaps orphans, and when the runner's end
// closes kills every process of the sandbox and returns. It runs on the
// locked thread that dropped the capabilities: every fork happens here.
func serveSandbox(cfg initConfig, rec *execRecorder) initResult {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	if err := ctlSend(ctlFD, ctlReply{Op: "ready"}); err != nil {
		return fail("control", err)
	}
	type request struct {
		req ctlRequest
		fds []int
	}
	reqs := make(chan request)
	go func() {
		buf := make([]byte, ctlMaxMessage)
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
				ctlSend(ctlFD, ctlReply{Op: "started", ID: r.req.ID})
			case "signal":
				closeAll(r.fds)
				if pid, ok := groups[r.req.ID]; ok {
					_ = unix.Kill(-pid, unix.Signal(r.req.Sig))
				}
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
// them, each with the denied execs of its process group (rec); the
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
		rep := ctlReply{Op: "exit", ID: id, CPUNanos: ru.Utime.Nano() + ru.Stime.Nano()}
		rep.ExecDenials, rep.ExecDenialsTotal = rec.take(pid)
		if ws.Signaled() {
			rep.Signal = int(ws.Signal())
		} else {
			code := ws.ExitStatus()
			rep.ExitCode = &code
		}
		ctlSend(ctlFD, rep)
	}
}

// startExec forks one exec with fds as its stdin, stdout and stderr.
func startExec(cfg initConfig, req ctlRequest, fds []int) (int, error) {
	if len(fds) != 3 || len(req.Argv) == 0 {
		return 0, fmt.Errorf("an exec needs an argv and three descriptors")
	}
	dir := filepath.Join(WorkspaceMount, req.Cwd)
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
	closeExtraFDs()
	pid, err := forkExecKillable(path, req.Argv, attr)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", req.Argv[0], err)
	}
	return pid, nil
}
