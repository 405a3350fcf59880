package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/job"
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

// maxStdinFrame bounds one stdin message (the server takes up to 1 MiB).
const maxStdinFrame = 32 << 10

// AttachOptions say where an attached socket starts and where stderr
// goes.
type AttachOptions struct {
	// Offset is the byte offset of the output to start from (0: what
	// the server's buffer still holds).
	Offset int64
	// Stderr receives the process's stderr; nil: Read returns it with
	// stdout. A process with a pty writes everything to stdout.
	Stderr io.Writer
}

// Terminal is a socket attached to a sandbox's process
// (/v1/sandboxes/{id}/processes/{pid}/ws): Write types into its input,
// Read returns its output, Resize sets its terminal's size, Wait
// returns its exit code. As with an os/exec pipe, output is not
// buffered beyond the socket: read it to EOF (or Close) for Wait to
// return. Closing the socket leaves the process running.
type Terminal struct {
	// PID is the process's pid as the sandbox sees it.
	PID int

	conn *websocket.Conn
	// ctx bounds every write: io.Writer's Write takes no context, so the
	// context the terminal was opened with is kept for its life (it is
	// canceled by Close).
	ctx    context.Context
	cancel context.CancelFunc
	out    *io.PipeReader
	done   chan struct{} // closed once the socket is read to its end

	mu     sync.Mutex
	status *statusFrame
	err    error // why the socket ended without a status
}

// OpenTerminal starts argv in the sandbox with a pseudo-terminal of
// size (0x0: 80x24) and attaches to it. The terminal lives until the
// process ends, Close, or ctx's end.
func (c *Client) OpenTerminal(ctx context.Context, id string, req ProcessRequest, size PtySize) (*Terminal, error) {
	req.Pty = &size
	p, err := c.StartProcess(ctx, id, req)
	if err != nil {
		return nil, err
	}
	t, err := c.AttachProcess(ctx, id, p.PID, AttachOptions{})
	if err != nil {
		// Nobody could ever type into it.
		c.KillProcess(context.WithoutCancel(ctx), id, p.PID)
		return nil, err
	}
	return t, nil
}

// AttachProcess attaches a socket to a running or ended process of the
// sandbox; any number may follow one process.
func (c *Client) AttachProcess(ctx context.Context, id string, pid int, opts AttachOptions) (*Terminal, error) {
	// A refused handshake loses the server's error code: ask first.
	if _, err := c.GetProcess(ctx, id, pid); err != nil {
		return nil, err
	}
	hdr := http.Header{}
	if c.Token != "" {
		hdr.Set("Authorization", "Bearer "+c.Token)
	}
	u := "ws" + strings.TrimPrefix(c.BaseURL, "http") + processPath(id, pid) + "/ws?" + url.Values{"offset": {strconv.FormatInt(opts.Offset, 10)}}.Encode()
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.HTTP, HTTPHeader: hdr, Subprotocols: []string{ExecSubprotocol}})
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot attach to the process").With("sandbox_id", id).With("pid", pid)
	}
	if conn.Subprotocol() != ExecSubprotocol {
		conn.CloseNow()
		return nil, job.Errorf(job.CodeRunIOFailed, "the server does not speak %s", ExecSubprotocol)
	}
	conn.SetReadLimit(16 << 20)
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	t := &Terminal{PID: pid, conn: conn, ctx: ctx, cancel: cancel, out: pr, done: make(chan struct{})}
	go t.readFrames(pw, opts.Stderr)
	return t, nil
}

// readFrames passes the socket's output to out (and stderr) until the
// status frame or the socket's end.
func (t *Terminal) readFrames(out *io.PipeWriter, stderr io.Writer) {
	defer close(t.done)
	err := func() error {
		for {
			typ, b, err := t.conn.Read(t.ctx)
			if err != nil {
				return err
			}
			if typ != websocket.MessageBinary || len(b) == 0 {
				continue
			}
			switch b[0] {
			case chanStdout:
				_, err = out.Write(b[1:])
			case chanStderr:
				if stderr != nil {
					_, err = stderr.Write(b[1:])
				} else {
					_, err = out.Write(b[1:])
				}
			case chanStatus:
				var s statusFrame
				if err := json.Unmarshal(b[1:], &s); err != nil {
					return job.Wrap(job.CodeRunIOFailed, err, "bad status frame")
				}
				t.mu.Lock()
				t.status = &s
				t.mu.Unlock()
				// The server closes the socket next; answer it.
				_ = t.conn.Close(websocket.StatusNormalClosure, "")
				return nil
			}
			if err != nil {
				return err
			}
		}
	}()
	if err != nil {
		if !errors.Is(err, io.ErrClosedPipe) && t.ctx.Err() == nil {
			err = job.Wrap(job.CodeRunIOFailed, err, "the terminal's socket ended before the process did").With("pid", t.PID)
		} else {
			err = job.Errorf(job.CodeRunIOFailed, "the terminal was closed before the process ended").With("pid", t.PID)
		}
		t.mu.Lock()
		t.err = err
		t.mu.Unlock()
		out.CloseWithError(err)
		return
	}
	out.Close()
}

// Read reads the process's output (and its stderr, unless attached
// with AttachOptions.Stderr); io.EOF once the process ended.
func (t *Terminal) Read(p []byte) (int, error) { return t.out.Read(p) }

// Write types p into the process's input (channel 0): with a pty, 0x03
// is Ctrl-C and 0x04 Ctrl-D.
func (t *Terminal) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxStdinFrame)]
		if err := t.send(chanStdin, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// Resize sets the process's terminal to cols x rows (a process without
// a pty ignores it).
func (t *Terminal) Resize(cols, rows uint16) error {
	b, _ := json.Marshal(struct{ Width, Height uint16 }{cols, rows})
	return t.send(chanResize, b)
}

func (t *Terminal) send(ch byte, b []byte) error {
	if err := t.conn.Write(t.ctx, websocket.MessageBinary, append([]byte{ch}, b...)); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot write to the terminal").With("pid", t.PID)
	}
	return nil
}

// Wait waits until the process ended and its output was read, and
// returns its exit code. A process that ended without one (killed, timed
// out) is an error with the run's status as details.reason.
func (t *Terminal) Wait() (int, error) {
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == nil {
		return -1, t.err
	}
	return t.status.exitCode()
}

// Close closes the socket, leaving the process running (kill it with
// Client.KillProcess).
func (t *Terminal) Close() error {
	// An error here is a socket the server already closed (the process
	// ended): there is nothing left to close.
	_ = t.conn.Close(websocket.StatusNormalClosure, "")
	t.cancel()
	t.out.Close()
	<-t.done
	return nil
}

// statusFrame is channel 3's JSON, a Kubernetes metav1.Status.
type statusFrame struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Details *struct {
		Causes []struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"causes"`
	} `json:"details"`
}

// exitCode is the exit code the status frame gives, or why it gives none.
func (s statusFrame) exitCode() (int, error) {
	if s.Status == "Success" {
		return 0, nil
	}
	if s.Reason == "NonZeroExitCode" && s.Details != nil {
		for _, c := range s.Details.Causes {
			if c.Reason == "ExitCode" {
				if n, err := strconv.Atoi(c.Message); err == nil {
					return n, nil
				}
			}
		}
	}
	code := job.CodeRunSignaled
	switch job.Status(s.Reason) {
	case job.StatusCanceled:
		code = job.CodeRunCanceled
	case job.StatusTimedOut:
		code = job.CodeRunTimedOut
	}
	return -1, job.Errorf(code, "%s", s.Message).With("reason", s.Reason)
}
