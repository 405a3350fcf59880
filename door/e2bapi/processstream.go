package e2bapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/agent-runner/agent-runner/door/e2bapi/envd/process"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// killGrace bounds the kill of a process whose timeout ran out.
const killGrace = 30 * time.Second

// Start starts a background process and streams its events: start (its
// pid), its output, and its end. The call's timeout (Connect-Timeout-Ms,
// the SDKs' timeoutMs) is the process's: it is killed then, whether or
// not a client still follows it; a client that leaves earlier leaves it
// running, as envd does.
func (p *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	id, err := p.d.rpcSandbox(req.Header())
	if err != nil {
		return err
	}
	preq, err := p.d.processRequest(req.Msg)
	if err != nil {
		return rpcError(err)
	}
	// envd gives a process no input unless asked.
	preq.NoStdin = req.Msg.Stdin != nil && !req.Msg.GetStdin()
	info, err := p.d.cfg.Sessions.StartProcess(ctx, id, preq)
	if err != nil {
		return rpcError(err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		p.killAt(id, info, deadline)
	}
	send := p.sender(ctx, req.Header(), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.StartResponse{Event: ev})
	})
	return p.follow(ctx, id, info, 0, send)
}

// Connect follows a running process from now on: start (its pid), its
// output, and its end.
func (p *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	id, err := p.d.rpcSandbox(req.Header())
	if err != nil {
		return err
	}
	pid, err := p.pid(id, req.Msg.GetProcess())
	if err != nil {
		return rpcError(err)
	}
	info, err := p.d.cfg.Sessions.Process(id, pid)
	if err == nil && info.State != session.ProcessRunning {
		err = job.Errorf(job.CodeJobNotFound, "process %d has exited", pid)
	}
	if err != nil {
		return rpcError(err)
	}
	send := p.sender(ctx, req.Header(), func(ev *process.ProcessEvent) error {
		return stream.Send(&process.ConnectResponse{Event: ev})
	})
	return p.follow(ctx, id, info, info.OutputBytes, send)
}

// processRequest is a start's process for the session service.
func (d *Door) processRequest(m *process.StartRequest) (session.ProcessRequest, error) {
	cfg := m.GetProcess()
	if cfg.GetCmd() == "" {
		return session.ProcessRequest{}, job.Errorf(job.CodeInvalidRequest, "the process needs its cmd").With("field", "cmd")
	}
	req := session.ProcessRequest{Argv: append([]string{cfg.GetCmd()}, cfg.GetArgs()...), Env: cfg.GetEnvs(), Tag: m.GetTag()}
	if cfg.Cwd != nil {
		cwd, err := d.workspacePath(cfg.GetCwd())
		if err != nil {
			return req, err
		}
		req.Cwd = cwd
	}
	if m.Pty != nil {
		size := m.GetPty().GetSize()
		req.Pty = &session.PtySize{Cols: clamp16(size.GetCols()), Rows: clamp16(size.GetRows())}
	}
	return req, nil
}

// killAt kills the process started as info at deadline, unless it ended
// (a pid since reused by another process is left alone).
func (p *processService) killAt(id string, info session.ProcessInfo, deadline time.Time) {
	time.AfterFunc(time.Until(deadline), func() {
		now, err := p.d.cfg.Sessions.Process(id, info.PID)
		if err != nil || now.RunID != info.RunID || now.State != session.ProcessRunning {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), killGrace)
		defer cancel()
		if _, err := p.d.cfg.Sessions.KillProcess(ctx, id, info.PID); err != nil {
			p.d.cfg.Logger.Warn("cannot kill a process whose timeout ran out", "sandbox", id, "pid", info.PID, "error", err)
		}
	})
}

// sender serializes a process stream's sends, with keepalives.
func (p *processService) sender(ctx context.Context, h http.Header, send func(*process.ProcessEvent) error) func(*process.ProcessEvent) error {
	return streamSender(ctx, h, send, func() *process.ProcessEvent {
		return &process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}
	})
}

// streamSender serializes a stream's sends and, when the client asks for
// them (Keepalive-Ping-Interval, in seconds), sends keepalive() between
// them until ctx ends.
func streamSender[T any](ctx context.Context, h http.Header, send func(T) error, keepalive func() T) func(T) error {
	var mu sync.Mutex
	locked := func(ev T) error {
		mu.Lock()
		defer mu.Unlock()
		return send(ev)
	}
	if s, err := strconv.Atoi(h.Get(headerKeepalive)); err == nil && s > 0 {
		go func() {
			t := time.NewTicker(time.Duration(s) * time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if locked(keepalive()) != nil {
						return
					}
				}
			}
		}()
	}
	return locked
}

// follow sends the process's start, its output from offset from, and
// its end; a call whose deadline passed ends DeadlineExceeded.
func (p *processService) follow(ctx context.Context, id string, info session.ProcessInfo, from int64, send func(*process.ProcessEvent) error) error {
	if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: uint32(info.PID)}}}); err != nil {
		return err
	}
	err := p.d.cfg.Sessions.FollowProcess(ctx, id, info.PID, from, func(ev session.ProcessEvent) error {
		switch data := ev.Data.(type) {
		case session.OutputEvent:
			return send(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: dataEvent(ev.Type, info.Pty, data)}})
		case session.ProcessInfo:
			if ev.Type == "exit" {
				return send(&process.ProcessEvent{Event: &process.ProcessEvent_End{End: endEvent(data)}})
			}
		}
		return nil
	})
	if err != nil {
		return rpcError(err)
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("the command's timeout ran out: it was killed"))
	case ctx.Err() != nil:
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	}
	return nil
}

// dataEvent is one write of a process's output: a terminal's (pty), or
// stdout's or stderr's.
func dataEvent(stream string, pty bool, o session.OutputEvent) *process.ProcessEvent_DataEvent {
	b := []byte(o.Data)
	if o.Base64 {
		if raw, err := base64.StdEncoding.DecodeString(o.Data); err == nil {
			b = raw
		}
	}
	switch {
	case pty:
		return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Pty{Pty: b}}
	case stream == "stderr":
		return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: b}}
	}
	return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: b}}
}

// endEvent is how a process ended, as envd says it: its exit code and
// "exit status N" (the error too, when N is not 0), or -1 and why it
// did not exit on its own.
func endEvent(info session.ProcessInfo) *process.ProcessEvent_EndEvent {
	if info.ExitCode != nil {
		status := fmt.Sprintf("exit status %d", *info.ExitCode)
		e := &process.ProcessEvent_EndEvent{ExitCode: int32(*info.ExitCode), Exited: true, Status: status}
		if *info.ExitCode != 0 {
			e.Error = &status
		}
		return e
	}
	status := "signal: killed"
	msg := status
	if info.Error != nil {
		msg = status + " (" + info.Error.Message + ")"
	}
	return &process.ProcessEvent_EndEvent{ExitCode: -1, Status: status, Error: &msg}
}
