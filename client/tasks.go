package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// TaskState is an agent task's lifecycle state (docs/tasks.md).
type TaskState string

// Terminal reports whether the task has finished: completed, failed,
// failed_preserved or cancelled.
func (s TaskState) Terminal() bool {
	switch s {
	case "completed", "failed", "failed_preserved", "cancelled":
		return true
	}
	return false
}

// TaskAccepted is the answer to SubmitTask.
type TaskAccepted struct {
	TaskID   string `json:"task_id"`
	Accepted bool   `json:"accepted"`
}

// Task is GET /api/v1/tasks/{id}: the task's state record, its manifest's
// name and labels, and Metadata once it has finished.
type Task struct {
	TaskID    string            `json:"task_id"`
	ParentID  string            `json:"parent_id,omitempty"`
	State     TaskState         `json:"state"`
	Reason    string            `json:"reason,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	StartedAt *time.Time        `json:"started_at,omitempty"`
	EndedAt   *time.Time        `json:"ended_at,omitempty"`
	Error     *job.Error        `json:"error,omitempty"`
	Name      string            `json:"name,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Metadata  *TaskMetadata     `json:"metadata,omitempty"`
}

// TaskMetadata is a finished task's metadata.json, the fields clients
// use most (the server sends more).
type TaskMetadata struct {
	ExitCode   *int           `json:"exit_code,omitempty"`
	Reason     string         `json:"reason"`
	Backend    string         `json:"backend"`
	DurationMS int64          `json:"duration_ms"`
	Artifacts  []TaskArtifact `json:"artifacts"`
}

// TaskArtifact is one collected file of a task.
type TaskArtifact struct {
	Name      string `json:"name"`
	SizeBytes int64  `json:"size_bytes"`
	SHA256    string `json:"sha256"`
}

// TaskFilter selects tasks for ListTasks; zero values select everything.
type TaskFilter struct {
	States []TaskState       // any of these states
	Labels map[string]string // every one of these labels
	Limit  int               // page size, 1..1000 (server default 100)
	Cursor string            // NextCursor of the previous page
}

// TaskList is one page of ListTasks, newest first.
type TaskList struct {
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"next_cursor,omitempty"`
	TotalCount int    `json:"total_count"`
}

func taskPath(id string) string { return "/api/v1/tasks/" + url.PathEscape(id) }

// SubmitTask submits a task manifest (YAML bytes, as in docs/tasks.md).
func (c *Client) SubmitTask(ctx context.Context, manifestYAML []byte) (TaskAccepted, error) {
	var a TaskAccepted
	resp, err := c.Do(ctx, http.MethodPost, "/api/v1/tasks", "application/yaml", bytes.NewReader(manifestYAML), nil)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	return a, json.NewDecoder(resp.Body).Decode(&a)
}

// GetTask returns a task's status.
func (c *Client) GetTask(ctx context.Context, id string) (Task, error) {
	var t Task
	return t, c.getJSON(ctx, taskPath(id), &t)
}

// ListTasks returns one page of tasks matching f; pass the page's
// NextCursor as f.Cursor for the next.
func (c *Client) ListTasks(ctx context.Context, f TaskFilter) (TaskList, error) {
	q := url.Values{}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, s := range f.States {
			states[i] = string(s)
		}
		q.Set("state", strings.Join(states, ","))
	}
	for k, v := range f.Labels {
		q.Add("label", k+"="+v)
	}
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	path := "/api/v1/tasks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l TaskList
	return l, c.getJSON(ctx, path, &l)
}

// WaitTask polls every interval until the task is terminal.
func (c *Client) WaitTask(ctx context.Context, id string, every time.Duration) (Task, error) {
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	for {
		t, err := c.GetTask(ctx, id)
		if err != nil || t.State.Terminal() {
			return t, err
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(every):
		}
	}
}

// CancelTask cancels a task (and its children) and returns its status.
func (c *Client) CancelTask(ctx context.Context, id string) (Task, error) {
	return c.taskAction(ctx, http.MethodDelete, taskPath(id))
}

// DestroyTask removes a terminal task's preserved workspace
// (job.not_terminal while it runs) and returns its status.
func (c *Client) DestroyTask(ctx context.Context, id string) (Task, error) {
	return c.taskAction(ctx, http.MethodPost, taskPath(id)+"/destroy")
}

func (c *Client) taskAction(ctx context.Context, method, path string) (Task, error) {
	var t Task
	resp, err := c.do(ctx, method, path, nil, nil)
	if err != nil {
		return t, err
	}
	defer resp.Body.Close()
	return t, json.NewDecoder(resp.Body).Decode(&t)
}

// TaskArtifacts lists a finished task's artifacts (job.not_terminal
// before).
func (c *Client) TaskArtifacts(ctx context.Context, id string) ([]TaskArtifact, error) {
	var out struct{ Artifacts []TaskArtifact }
	err := c.getJSON(ctx, taskPath(id)+"/artifacts", &out)
	return out.Artifacts, err
}

// DownloadTaskArtifact writes the artifact recorded as name to w and
// returns its recorded sha256.
func (c *Client) DownloadTaskArtifact(ctx context.Context, id, name string, w io.Writer) (string, error) {
	var parts []string
	for _, p := range strings.Split(name, "/") {
		parts = append(parts, url.PathEscape(p))
	}
	resp, err := c.do(ctx, http.MethodGet, taskPath(id)+"/artifacts/"+strings.Join(parts, "/"), nil, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return resp.Header.Get("X-Content-SHA256"), err
}

// TaskLogs follows a task's scrubbed stdout and stderr over SSE, calling
// fn with each line ("stdout" or "stderr"), until the task is terminal;
// it returns the final status the stream ends with.
func (c *Client) TaskLogs(ctx context.Context, id string, fn func(stream, line string) error) (Task, error) {
	var final Task
	resp, err := c.do(ctx, http.MethodGet, taskPath(id)+"/logs", nil, http.Header{"Accept": {"text/event-stream"}})
	if err != nil {
		return final, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if event == "completed" {
			if err := json.Unmarshal([]byte(data), &final); err != nil {
				return final, job.Wrap(job.CodeRunIOFailed, err, "bad completed event")
			}
			return final, nil
		}
		var l struct{ Line string }
		if err := json.Unmarshal([]byte(data), &l); err != nil {
			return final, job.Wrap(job.CodeRunIOFailed, err, "bad log event")
		}
		if err := fn(event, l.Line); err != nil {
			return final, err
		}
	}
	return final, job.Errorf(job.CodeRunIOFailed, "task log stream ended before the task did").With("task_id", id)
}
