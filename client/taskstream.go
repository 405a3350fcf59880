package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/job"
)

// TaskMessage is one message of a task's WebSocket stream: Type is
// state_change (From, To, Reason), output (Stream, Text: one scrubbed
// line), progress, metrics or error (Error: why the task failed).
type TaskMessage struct {
	Type        string          `json:"type"`
	TaskID      string          `json:"task_id"`
	Time        time.Time       `json:"time,omitzero"`
	From        TaskState       `json:"from,omitempty"`
	To          TaskState       `json:"to,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Stream      string          `json:"stream,omitempty"`
	Text        string          `json:"text,omitempty"`
	Progress    json.RawMessage `json:"progress,omitempty"`
	CPUSeconds  *float64        `json:"cpu_seconds,omitempty"`
	MemoryBytes *int64          `json:"memory_bytes,omitempty"`
	Error       *job.Error      `json:"error,omitempty"`
}

// FollowTask reads /ws/tasks/{id}/stream, calling fn for each message:
// the task's whole history first, then live news, until the server closes
// the stream normally once the task is terminal (nil) or fn fails.
func (c *Client) FollowTask(ctx context.Context, id string, fn func(TaskMessage) error) error {
	// Check the task first: a WebSocket handshake refused with 404 loses
	// the server's error code.
	if _, err := c.GetTask(ctx, id); err != nil {
		return err
	}
	hdr := http.Header{}
	if c.Token != "" {
		hdr.Set("Authorization", "Bearer "+c.Token)
	}
	wsURL := "ws" + strings.TrimPrefix(c.BaseURL, "http") + "/ws/tasks/" + url.PathEscape(id) + "/stream"
	conn, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: c.HTTP, HTTPHeader: hdr})
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot open the task stream").With("task_id", id)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(8 << 20)
	for {
		_, b, err := conn.Read(ctx)
		if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return job.Wrap(job.CodeRunIOFailed, err, "task stream broke").With("task_id", id)
		}
		var m TaskMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "bad task stream message")
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}
