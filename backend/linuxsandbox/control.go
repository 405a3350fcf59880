package linuxsandbox

import (
	"encoding/json"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/job"
)

// A sandbox's init and the runner talk over a SOCK_SEQPACKET Unix socket
// pair, the init's fd 4: one JSON object per message, so no framing is
// needed, and a request to start a process carries its stdin, stdout and
// stderr as SCM_RIGHTS. The init sends {"op":"ready"} once the sandbox is built
// (or an initResult with the failed stage); then the runner sends exec
// and signal requests, and the init answers each exec with started (and
// its pid) or error, and later exit. A connect request (ports.go) is
// answered with connected, carrying the one descriptor of a TCP socket
// the init connected to 127.0.0.1:port inside the sandbox, or error.
// The init serves until
// the runner's end closes, then kills everything; the runner never
// trusts a message for more than the exec it names.

// ctlMaxMessage bounds one control message (an exec's argv and env).
const ctlMaxMessage = 1 << 20

// ctlMaxReply bounds what the runner reads of one init message (replies
// are small; a longer one is refused as truncated).
const ctlMaxReply = 64 << 10

// ctlRequest is a runner-to-init message.
type ctlRequest struct {
	// Op is "exec" (start Argv, with three descriptors attached),
	// "signal" (send Sig to the exec's process group) or "connect"
	// (connect to 127.0.0.1:Port inside the sandbox).
	Op   string   `json:"op"`
	ID   uint64   `json:"id"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	// Cwd is clean and relative to the workspace.
	Cwd string `json:"cwd,omitempty"`
	Sig int    `json:"sig,omitempty"`
	// Port is a connect's loopback port.
	Port int `json:"port,omitempty"`
	// Terminal makes the exec a session leader with its stdin (a
	// terminal) as its controlling terminal.
	Terminal bool `json:"terminal,omitempty"`
	// Final marks a one-shot run's workload, honoured only as the first
	// request: its signals go to every process of the sandbox, and when
	// it exits the init kills them all, reports the exit and exits, as
	// a one-shot init always did (runFinal).
	Final bool `json:"final,omitempty"`
}

// ctlReply is an init-to-runner message.
type ctlReply struct {
	// Op is "ready", "started", "error" (the exec did not start, or the
	// connect failed), "exit" or "connected" (one descriptor attached);
	// a setup failure comes as an initResult (Stage and Error).
	Op string `json:"op,omitempty"`
	ID uint64 `json:"id,omitempty"`
	// Pid is a started exec's pid inside the sandbox.
	Pid      int  `json:"pid,omitempty"`
	ExitCode *int `json:"exit_code,omitempty"`
	Signal   int  `json:"signal,omitempty"`
	// CPUNanos is the exec's user and system time (with its waited-for
	// children).
	CPUNanos int64  `json:"cpu_ns,omitempty"`
	Error    string `json:"error,omitempty"`
	Stage    string `json:"stage,omitempty"`
	// Refused says a connect's error was ECONNREFUSED (nothing listens).
	Refused bool `json:"refused,omitempty"`
	// ExecDenials, on exit, are the refused execs of the exec's process
	// group (execrecord.go).
	ExecDenials      []job.ExecDenial `json:"exec_denials,omitempty"`
	ExecDenialsTotal int              `json:"exec_denials_total,omitempty"`
}

// ctlSend writes one message with fds attached.
func ctlSend(fd int, msg any, fds ...int) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if len(b) > ctlMaxMessage {
		return fmt.Errorf("control message of %d bytes is over %d", len(b), ctlMaxMessage)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for {
		err = unix.Sendmsg(fd, b, oob, nil, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

// ctlReceive reads one message into msg and returns the fds attached
// (close-on-exec). It returns io.EOF-like errors (unix.ECONNRESET, or
// errEOF) when the peer is gone.
func ctlReceive(fd int, buf []byte, msg any) ([]int, error) {
	oob := make([]byte, unix.CmsgSpace(3*4))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errEOF
		}
		var fds []int
		if oobn > 0 {
			cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err == nil {
				for _, c := range cmsgs {
					got, err := unix.ParseUnixRights(&c)
					if err == nil {
						fds = append(fds, got...)
					}
				}
			}
		}
		if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
			closeAll(fds)
			return nil, fmt.Errorf("control message truncated")
		}
		if err := json.Unmarshal(buf[:n], msg); err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("control message: %w", err)
		}
		return fds, nil
	}
}

// errEOF is the peer's end closing.
var errEOF = fmt.Errorf("control socket closed")

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
