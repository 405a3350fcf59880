package sessionapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/door/httpreply"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// ExecSubprotocol is the WebSocket subprotocol of a process's socket:
// Kubernetes exec framing, whose first byte of every binary message is
// its channel.
const ExecSubprotocol = "v4.channel.k8s.io"

// The channels of ExecSubprotocol.
const (
	chanStdin  = 0
	chanStdout = 1
	chanStderr = 2
	chanStatus = 3
	chanResize = 4
)

// maxFrameBytes bounds one message a client sends (stdin or resize).
const maxFrameBytes = 1 << 20

// resizeFrame is channel 4's JSON.
type resizeFrame struct {
	Width  uint16 `json:"Width"`
	Height uint16 `json:"Height"`
}

// statusCause, statusDetails and statusFrame are channel 3's JSON: a
// Kubernetes metav1.Status, Success, or Failure with the exit code as
// the cause ExitCode (reason NonZeroExitCode) or the run's error.
type statusCause struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type statusDetails struct {
	Causes []statusCause `json:"causes"`
}

type statusFrame struct {
	Metadata struct{}       `json:"metadata"`
	Status   string         `json:"status"`
	Reason   string         `json:"reason,omitempty"`
	Message  string         `json:"message,omitempty"`
	Details  *statusDetails `json:"details,omitempty"`
}

// status is the status frame of an ended process.
func status(info session.ProcessInfo) statusFrame {
	var f statusFrame
	switch {
	case info.ExitCode != nil && *info.ExitCode == 0:
		f.Status = "Success"
	case info.ExitCode != nil:
		f.Status, f.Reason = "Failure", "NonZeroExitCode"
		f.Message = "command terminated with non-zero exit code " + strconv.Itoa(*info.ExitCode)
		f.Details = &statusDetails{Causes: []statusCause{{Reason: "ExitCode", Message: strconv.Itoa(*info.ExitCode)}}}
	default:
		f.Status, f.Reason, f.Message = "Failure", string(info.Status), "the process ended without an exit code"
		if info.Error != nil {
			f.Message = info.Error.Message
		}
	}
	return f
}

// serveProcessSocket attaches a WebSocket to a running process
// (ExecSubprotocol): the client's channel 0 is the process's input,
// channel 4 resizes its terminal; the process's output, from ?offset=
// (default 0: what the buffer holds), comes on channels 1 and 2, and
// its end as channel 3's status, after which the socket closes
// normally. A process without a terminal ignores resizes.
func serveProcessSocket(s *session.Service, w http.ResponseWriter, r *http.Request) {
	p, ok := pid(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	var from int64
	if v := r.URL.Query().Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			httpreply.Error(w, job.Errorf(job.CodeInvalidRequest, "offset must be a byte offset (0 or more)").With("field", "offset"))
			return
		}
		from = n
	}
	if _, err := s.Process(id, p); err != nil {
		httpreply.Error(w, err)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{ExecSubprotocol}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	if c.Subprotocol() != ExecSubprotocol {
		c.Close(websocket.StatusPolicyViolation, "subprotocol "+ExecSubprotocol+" is required")
		return
	}
	c.SetReadLimit(maxFrameBytes + 1)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		defer cancel()
		readFrames(ctx, c, s, id, p)
	}()
	err = s.FollowProcess(ctx, id, p, from, func(ev session.ProcessEvent) error {
		switch ev.Type {
		case "stdout", "stderr":
			o := ev.Data.(session.OutputEvent)
			ch := byte(chanStdout)
			if ev.Type == "stderr" {
				ch = chanStderr
			}
			return c.Write(ctx, websocket.MessageBinary, append([]byte{ch}, outputBytes(o)...))
		case "exit":
			b, _ := json.Marshal(status(ev.Data.(session.ProcessInfo)))
			return c.Write(ctx, websocket.MessageBinary, append([]byte{chanStatus}, b...))
		}
		return nil
	})
	switch {
	case ctx.Err() != nil:
	case err != nil:
		c.Close(websocket.StatusInternalError, job.AsError(err).Message)
	default:
		c.Close(websocket.StatusNormalClosure, "process exited")
	}
}

// outputBytes is an output event's bytes.
func outputBytes(o session.OutputEvent) []byte {
	if !o.Base64 {
		return []byte(o.Data)
	}
	b, _ := base64.StdEncoding.DecodeString(o.Data)
	return b
}

// readFrames passes the client's frames to the process until the socket
// or ctx ends: channel 0 to its input, channel 4 to its terminal's size.
func readFrames(ctx context.Context, c *websocket.Conn, s *session.Service, id string, pid int) {
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageBinary || len(b) == 0 {
			continue
		}
		switch b[0] {
		case chanStdin:
			// Input after the process ended is dropped: its status
			// frame is on its way.
			_ = s.WriteStdin(ctx, id, pid, b[1:], false)
		case chanResize:
			var f resizeFrame
			if json.Unmarshal(b[1:], &f) == nil && f.Width > 0 && f.Height > 0 {
				// A process without a terminal has none to resize.
				_ = s.ResizeProcess(id, pid, session.PtySize{Cols: f.Width, Rows: f.Height})
			}
		}
	}
}
