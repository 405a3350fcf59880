package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// PtySize is a terminal's size in characters.
type PtySize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// ProcessRequest is POST /v1/sandboxes/{id}/processes: a background
// process, with a pseudo-terminal of its own when Pty is set.
type ProcessRequest struct {
	Argv []string          `json:"argv"`
	Cwd  string            `json:"cwd,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	Pty  *PtySize          `json:"pty,omitempty"`
	Tag  string            `json:"tag,omitempty"`
}

// Process is a sandbox's process as the server answers it. State is
// running or exited; once exited, Status is its run's status and
// ExitCode its exit code (nil when it never exited by itself).
// OutputBytes is the offset of the next byte it writes.
type Process struct {
	PID         int        `json:"pid"`
	Tag         string     `json:"tag,omitempty"`
	RunID       string     `json:"run_id"`
	Argv        []string   `json:"argv"`
	Pty         bool       `json:"pty"`
	State       string     `json:"state"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	Status      job.Status `json:"status,omitempty"`
	ExitCode    *int       `json:"exit_code"`
	Error       *job.Error `json:"error,omitempty"`
	OutputBytes int64      `json:"output_bytes"`
}

// ProcessEvent is one event of a process's stream (docs/sessions.md,
// "Processes"). Type is start (Process set), stdout or stderr (Data:
// the bytes written from Offset), gap (the buffer had dropped bytes
// From to To) or exit (Process set, ended). Next is the offset to
// resume from after this event.
type ProcessEvent struct {
	Type    string
	Next    int64
	Offset  int64
	Data    []byte
	From    int64
	To      int64
	Process *Process
}

func processesPath(id string) string { return sandboxPath(id) + "/processes" }

func processPath(id string, pid int) string { return processesPath(id) + "/" + strconv.Itoa(pid) }

// StartProcess starts a background process in the sandbox and returns
// it running (a denial of the sandbox's policy is the policy.* error).
func (c *Client) StartProcess(ctx context.Context, id string, req ProcessRequest) (Process, error) {
	var p Process
	return p, c.postJSON(ctx, processesPath(id), req, &p)
}

// ListProcesses returns the sandbox's running processes and its newest
// ended ones, oldest first.
func (c *Client) ListProcesses(ctx context.Context, id string) ([]Process, error) {
	var out struct {
		Processes []Process `json:"processes"`
	}
	return out.Processes, c.getJSON(ctx, processesPath(id), &out)
}

// GetProcess returns one process.
func (c *Client) GetProcess(ctx context.Context, id string, pid int) (Process, error) {
	var p Process
	return p, c.getJSON(ctx, processPath(id, pid), &p)
}

// KillProcess stops a process (TERM to its group, the kill grace, KILL)
// and returns it ended.
func (c *Client) KillProcess(ctx context.Context, id string, pid int) (Process, error) {
	var p Process
	resp, err := c.do(ctx, http.MethodDelete, processPath(id, pid), nil, nil)
	if err != nil {
		return p, err
	}
	defer resp.Body.Close()
	return p, json.NewDecoder(resp.Body).Decode(&p)
}

// SignalProcess sends sig (HUP, INT, TERM, KILL, ...; with or without
// SIG) to the process's group.
func (c *Client) SignalProcess(ctx context.Context, id string, pid int, sig string) error {
	var out map[string]any
	return c.postJSON(ctx, processPath(id, pid)+"/signal", map[string]string{"signal": sig}, &out)
}

// ResizeProcess sets the size of the process's terminal
// (session.no_terminal when it has none).
func (c *Client) ResizeProcess(ctx context.Context, id string, pid int, size PtySize) error {
	var out PtySize
	return c.postJSON(ctx, processPath(id, pid)+"/resize", size, &out)
}

// WriteProcessStdin writes data to the process's input; eof then ends
// it (with a pty: ^D).
func (c *Client) WriteProcessStdin(ctx context.Context, id string, pid int, data []byte, eof bool) error {
	path := processPath(id, pid) + "/stdin"
	if eof {
		path += "?eof=true"
	}
	resp, err := c.Do(ctx, http.MethodPost, path, "application/octet-stream", bytes.NewReader(data), nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// FollowProcess reads the process's events over SSE from byte offset
// from (0: start, then what the buffer holds), calling fn for each,
// until the exit event (then nil) or fn fails (its error).
func (c *Client) FollowProcess(ctx context.Context, id string, pid int, from int64, fn func(ProcessEvent) error) error {
	path := processPath(id, pid) + "/events?" + url.Values{"offset": {strconv.FormatInt(from, 10)}}.Encode()
	resp, err := c.do(ctx, http.MethodGet, path, nil, http.Header{"Accept": {"text/event-stream"}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev ProcessEvent
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			ev.Next, _ = strconv.ParseInt(v, 10, 64)
		} else if v, ok := strings.CutPrefix(line, "event: "); ok {
			ev.Type = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok {
			if err := decodeProcessEvent(&ev, []byte(v)); err != nil {
				return err
			}
		} else if line == "" && ev.Type != "" {
			if err := fn(ev); err != nil {
				return err
			}
			if ev.Type == "exit" {
				return nil
			}
			ev = ProcessEvent{}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return job.Errorf(job.CodeRunIOFailed, "the event stream of process %d ended before the process did", pid).With("sandbox_id", id)
}

// decodeProcessEvent fills ev from its data line, by ev.Type.
func decodeProcessEvent(ev *ProcessEvent, data []byte) error {
	bad := func(err error) error {
		return job.Wrap(job.CodeRunIOFailed, err, fmt.Sprintf("bad %s event", ev.Type))
	}
	switch ev.Type {
	case "start", "exit":
		ev.Process = new(Process)
		if err := json.Unmarshal(data, ev.Process); err != nil {
			return bad(err)
		}
	case "stdout", "stderr":
		var o struct {
			Offset int64  `json:"offset"`
			Data   string `json:"data"`
			Base64 bool   `json:"base64"`
		}
		if err := json.Unmarshal(data, &o); err != nil {
			return bad(err)
		}
		ev.Offset, ev.Data = o.Offset, []byte(o.Data)
		if o.Base64 {
			b, err := base64.StdEncoding.DecodeString(o.Data)
			if err != nil {
				return bad(err)
			}
			ev.Data = b
		}
	case "gap":
		var g struct {
			From int64 `json:"from"`
			To   int64 `json:"to"`
		}
		if err := json.Unmarshal(data, &g); err != nil {
			return bad(err)
		}
		ev.From, ev.To = g.From, g.To
	}
	return nil
}
