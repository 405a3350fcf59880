package e2bapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem"
	"github.com/agent-runner/agent-runner/door/e2bapi/envd/filesystem/filesystemconnect"
	"github.com/agent-runner/agent-runner/door/e2bapi/envd/process"
	"github.com/agent-runner/agent-runner/door/e2bapi/envd/process/processconnect"
)

// codecs are the Connect codecs the SDKs use: JSON (the JS SDK) and
// binary protobuf.
var codecs = map[string][]connect.ClientOption{"json": {connect.WithProtoJSON()}, "binary": nil}

// sandboxHeaders sets a call's sandbox headers.
func sandboxHeaders(h http.Header, sb created) {
	h.Set("E2b-Sandbox-Id", sb.SandboxID)
	h.Set("X-Access-Token", sb.EnvdAccessToken)
}

// run starts argv and gathers its stream: stdout, stderr and the end.
func run(t *testing.T, c processconnect.ProcessClient, sb created, stdin bool, argv ...string) (string, string, *process.ProcessEvent_EndEvent) {
	t.Helper()
	req := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: argv[0], Args: argv[1:]}, Stdin: &stdin})
	sandboxHeaders(req.Header(), sb)
	stream, err := c.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var out, errOut string
	var started bool
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().GetEvent().(type) {
		case *process.ProcessEvent_Start:
			started = ev.Start.GetPid() > 0
		case *process.ProcessEvent_Data:
			out += string(ev.Data.GetStdout())
			errOut += string(ev.Data.GetStderr())
		case *process.ProcessEvent_End:
			if !started {
				t.Errorf("%q: the end came without a start", argv)
			}
			return out, errOut, ev.End
		}
	}
	t.Fatalf("%q: the stream ended without an end: %v", argv, stream.Err())
	return "", "", nil
}

func TestProcessOverConnect(t *testing.T) {
	srv := newServer(t)
	sb := create(t, srv, `{}`)
	for name, opts := range codecs {
		t.Run(name, func(t *testing.T) {
			c := processconnect.NewProcessClient(http.DefaultClient, srv.URL+"/e2b", opts...)
			out, errOut, end := run(t, c, sb, false, "sh", "-c", "echo out; echo err >&2; exit 2")
			if out != "out\n" || errOut != "err\n" || end.GetExitCode() != 2 || !end.GetExited() || end.GetError() != "exit status 2" {
				t.Errorf("Start = %q %q %v, want out, err, exit status 2", out, errOut, end)
			}

			// A process with its input open: SendInput, CloseStdin, and
			// List while it runs.
			req := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "cat"}, Tag: ptr("cat-" + name), Stdin: ptr(true)})
			sandboxHeaders(req.Header(), sb)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stream, err := c.Start(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			if !stream.Receive() || stream.Msg().GetEvent().GetStart() == nil {
				t.Fatalf("no start event: %v", stream.Err())
			}
			pid := stream.Msg().GetEvent().GetStart().GetPid()
			list := connect.NewRequest(&process.ListRequest{})
			sandboxHeaders(list.Header(), sb)
			procs, err := c.List(ctx, list)
			if err != nil || len(procs.Msg.GetProcesses()) != 1 || procs.Msg.GetProcesses()[0].GetPid() != pid || procs.Msg.GetProcesses()[0].GetTag() != "cat-"+name {
				t.Errorf("List = %v, %v; want pid %d tagged", procs, err, pid)
			}
			byTag := &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: "cat-" + name}}
			in := connect.NewRequest(&process.SendInputRequest{Process: byTag, Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("typed\n")}}})
			sandboxHeaders(in.Header(), sb)
			if _, err := c.SendInput(ctx, in); err != nil {
				t.Fatal(err)
			}
			closeReq := connect.NewRequest(&process.CloseStdinRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}})
			sandboxHeaders(closeReq.Header(), sb)
			if _, err := c.CloseStdin(ctx, closeReq); err != nil {
				t.Fatal(err)
			}
			var got string
			for stream.Receive() {
				got += string(stream.Msg().GetEvent().GetData().GetStdout())
				if end := stream.Msg().GetEvent().GetEnd(); end != nil && end.GetExitCode() != 0 {
					t.Errorf("cat ended %v", end)
				}
			}
			if got != "typed\n" {
				t.Errorf("cat echoed %q, want typed", got)
			}

			// A signal to a process that ended is NotFound (the SDKs' kill
			// answers false).
			sig := connect.NewRequest(&process.SendSignalRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}, Signal: process.Signal_SIGNAL_SIGKILL})
			sandboxHeaders(sig.Header(), sb)
			if _, err := c.SendSignal(ctx, sig); connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("SendSignal to an ended process = %v, want NotFound", err)
			}

			// A wrong access token is Unauthenticated; acting as another
			// user is Unimplemented.
			bad := connect.NewRequest(&process.ListRequest{})
			bad.Header().Set("E2b-Sandbox-Id", sb.SandboxID)
			bad.Header().Set("X-Access-Token", "ea_wrong")
			if _, err := c.List(ctx, bad); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Errorf("List with a wrong token = %v, want Unauthenticated", err)
			}
			fs := filesystemconnect.NewFilesystemClient(http.DefaultClient, srv.URL+"/e2b", opts...)
			stat := connect.NewRequest(&filesystem.StatRequest{Path: "."})
			sandboxHeaders(stat.Header(), sb)
			stat.Header().Set("Authorization", "Basic cm9vdDo=") // root:
			var cerr *connect.Error
			if _, err := fs.Stat(ctx, stat); !errors.As(err, &cerr) || cerr.Code() != connect.CodeUnimplemented || !strings.Contains(cerr.Message(), "user root") {
				t.Errorf("Stat as root = %v, want Unimplemented naming the user", err)
			}
		})
	}
}

// TestStartTimeoutKills: a Start's timeout (Connect-Timeout-Ms) kills
// the process.
func TestStartTimeoutKills(t *testing.T) {
	srv := newServer(t)
	sb := create(t, srv, `{}`)
	c := processconnect.NewProcessClient(http.DefaultClient, srv.URL+"/e2b")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "sleep", Args: []string{"60"}}, Tag: ptr("sleeper")})
	sandboxHeaders(req.Header(), sb)
	stream, err := c.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
	}
	stream.Close()
	if code := connect.CodeOf(stream.Err()); code != connect.CodeDeadlineExceeded {
		t.Errorf("Start past its timeout ended %v, want DeadlineExceeded", stream.Err())
	}
	list := connect.NewRequest(&process.ListRequest{})
	sandboxHeaders(list.Header(), sb)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		procs, err := c.List(context.Background(), list)
		if err != nil {
			t.Fatal(err)
		}
		if len(procs.Msg.GetProcesses()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process still runs after its timeout: %v", procs.Msg)
		}
	}
}

func ptr[T any](v T) *T { return &v }
