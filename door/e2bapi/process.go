package e2bapi

import (
	"context"
	"syscall"

	"connectrpc.com/connect"

	"github.com/agent-runner/agent-runner/door/e2bapi/envd/process"
	"github.com/agent-runner/agent-runner/door/e2bapi/envd/process/processconnect"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// processService is envd's process.Process over the session service's
// background processes.
type processService struct{ d *Door }

var _ processconnect.ProcessHandler = (*processService)(nil)

// pid is the running process sel selects in sandbox id: by pid, or by
// the tag it was started with.
func (p *processService) pid(id string, sel *process.ProcessSelector) (int, error) {
	switch s := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		return int(s.Pid), nil
	case *process.ProcessSelector_Tag:
		infos, err := p.d.cfg.Sessions.Processes(id)
		if err != nil {
			return 0, err
		}
		for _, info := range infos {
			if info.Tag == s.Tag && info.State == session.ProcessRunning {
				return info.PID, nil
			}
		}
		return 0, job.Errorf(job.CodeJobNotFound, "no running process tagged %q", s.Tag)
	}
	return 0, job.Errorf(job.CodeInvalidRequest, "the call must select a process by pid or tag")
}

// List answers the sandbox's running processes.
func (p *processService) List(ctx context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	id, err := p.d.rpcSandbox(req.Header())
	if err != nil {
		return nil, err
	}
	infos, err := p.d.cfg.Sessions.Processes(id)
	if err != nil {
		return nil, rpcError(err)
	}
	out := &process.ListResponse{}
	for _, info := range infos {
		if info.State != session.ProcessRunning {
			continue
		}
		pi := &process.ProcessInfo{Pid: uint32(info.PID), Config: &process.ProcessConfig{Cmd: info.Argv[0], Args: info.Argv[1:]}}
		if info.Tag != "" {
			pi.Tag = &info.Tag
		}
		out.Processes = append(out.Processes, pi)
	}
	return connect.NewResponse(out), nil
}

// SendInput passes bytes to the process's input (typed, with a pty).
func (p *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	id, err := p.d.rpcSandbox(req.Header())
	if err != nil {
		return nil, err
	}
	if err := p.input(ctx, id, req.Msg.GetProcess(), req.Msg.GetInput()); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (p *processService) input(ctx context.Context, id string, sel *process.ProcessSelector, in *process.ProcessInput) error {
	pid, err := p.pid(id, sel)
	if err != nil {
		return err
	}
	var data []byte
	switch i := in.GetInput().(type) {
	case *process.ProcessInput_Stdin:
		data = i.Stdin
	case *process.ProcessInput_Pty:
		data = i.Pty
	default:
		return job.Errorf(job.CodeInvalidRequest, "the input must be stdin or pty bytes")
	}
	return p.d.cfg.Sessions.WriteStdin(ctx, id, pid, data, false)
}

// StreamInput passes a stream of inputs to the process its first
// message selects.
func (p *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	id, err := p.d.rpcSandbox(stream.RequestHeader())
	if err != nil {
		return nil, err
	}
	var sel *process.ProcessSelector
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *process.StreamInputRequest_Start:
			sel = ev.Start.GetProcess()
		case *process.StreamInputRequest_Data:
			if sel == nil {
				return nil, rpcError(job.Errorf(job.CodeInvalidRequest, "the stream's first message must select the process"))
			}
			if err := p.input(ctx, id, sel, ev.Data.GetInput()); err != nil {
				return nil, rpcError(err)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

// CloseStdin ends the process's input.
func (p *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	id, err := p.d.rpcSandbox(req.Header())
	if err != nil {
		return nil, err
	}
	pid, err := p.pid(id, req.Msg.GetProcess())
	if err == nil {
		err = p.d.cfg.Sessions.WriteStdin(ctx, id, pid, nil, true)
	}
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// SendSignal sends SIGTERM or SIGKILL to the process's group.
func (p *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	id, err := p.d.rpcSandbox(req.Header())
	if err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case process.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, rpcError(job.Errorf(job.CodeInvalidRequest, "signal %v is not SIGTERM or SIGKILL", req.Msg.GetSignal()))
	}
	pid, err := p.pid(id, req.Msg.GetProcess())
	if err == nil {
		err = p.d.cfg.Sessions.SignalProcess(id, pid, sig)
	}
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

// Update resizes the process's terminal.
func (p *processService) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	id, err := p.d.rpcSandbox(req.Header())
	if err != nil {
		return nil, err
	}
	pid, err := p.pid(id, req.Msg.GetProcess())
	if err == nil && req.Msg.Pty != nil {
		size := req.Msg.GetPty().GetSize()
		err = p.d.cfg.Sessions.ResizeProcess(id, pid, session.PtySize{Cols: clamp16(size.GetCols()), Rows: clamp16(size.GetRows())})
	}
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

// clamp16 is n as a terminal dimension.
func clamp16(n uint32) uint16 {
	if n > 0xffff {
		return 0xffff
	}
	return uint16(n)
}
