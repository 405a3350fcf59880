package client

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// SandboxState is a kept sandbox's place in its life (docs/sessions.md):
// starting, running, paused, then stopped, failed or expired for good.
type SandboxState string

// Live reports whether a sandbox in state s may still be used.
func (s SandboxState) Live() bool { return s == "starting" || s == "running" || s == "paused" }

// SandboxLimits are what a sandbox's processes share.
type SandboxLimits struct {
	MemoryMB     int64 `json:"memory_mb,omitempty"`
	CPUCount     int64 `json:"cpu_count,omitempty"`
	MaxProcesses int64 `json:"max_processes,omitempty"`
	TmpMB        int64 `json:"tmp_mb,omitempty"`
}

// SandboxNetwork is a sandbox's network: mode "disabled" (the default),
// "allowlist" (to AllowedHosts through the egress gateway) or "host".
type SandboxNetwork struct {
	Mode         string   `json:"mode,omitempty"`
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
}

// SandboxWorkspace names the host directory (under serve's
// --workspace-root) a sandbox's workspace starts as a copy of.
type SandboxWorkspace struct {
	Path string `json:"path,omitempty"`
}

// SandboxRequest is POST /v1/sandboxes; zero fields take serve's
// defaults.
type SandboxRequest struct {
	ID        string            `json:"id,omitempty"`
	Backend   string            `json:"backend,omitempty"`
	Workspace *SandboxWorkspace `json:"workspace,omitempty"`
	Limits    *SandboxLimits    `json:"limits,omitempty"`
	Policy    *job.Policy       `json:"policy,omitempty"`
	Network   *SandboxNetwork   `json:"network,omitempty"`
	TimeoutS  int64             `json:"timeout_s,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// Sandbox is a kept sandbox's record as the server answers it.
type Sandbox struct {
	ID        string            `json:"id"`
	State     SandboxState      `json:"state"`
	Backend   string            `json:"backend"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	EndedAt   *time.Time        `json:"ended_at,omitempty"`
	TimeoutS  int64             `json:"timeout_s"`
	Workspace SandboxWorkspace  `json:"workspace"`
	Limits    SandboxLimits     `json:"limits"`
	Network   SandboxNetwork    `json:"network"`
	Policy    *job.Policy       `json:"policy,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Execs     int64             `json:"execs"`
	LastRun   string            `json:"last_run,omitempty"`
	Error     *job.Error        `json:"error,omitempty"`
	// Worker names the remote worker that holds it (empty: the server
	// itself).
	Worker string `json:"worker,omitempty"`
}

// SandboxFilter selects sandboxes for ListSandboxes; zero values select
// every one.
type SandboxFilter struct {
	State    SandboxState      // only this state
	Metadata map[string]string // every one of these pairs
}

// ExecRequest is one command run in a sandbox.
type ExecRequest struct {
	Argv     []string          `json:"argv"`
	Cwd      string            `json:"cwd,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Stdin    string            `json:"stdin,omitempty"`
	TimeoutS int64             `json:"timeout_s,omitempty"`
}

// ExecResult is an exec's answer: a recorded run (GET /v1/jobs/{RunID}).
// A policy denial or a timeout is a result, not an error: Status says
// which, Error carries its code, ExitCode is nil when the process never
// exited.
type ExecResult struct {
	RunID      string     `json:"run_id"`
	Status     job.Status `json:"status"`
	ExitCode   *int       `json:"exit_code"`
	Stdout     string     `json:"stdout"`
	Stderr     string     `json:"stderr"`
	Truncated  bool       `json:"truncated"`
	DurationMS int64      `json:"duration_ms"`
	Error      *job.Error `json:"error,omitempty"`
}

func sandboxPath(id string) string { return "/v1/sandboxes/" + url.PathEscape(id) }

// CreateSandbox creates a kept sandbox (or answers the existing one when
// the same request names the same id) and returns it running.
func (c *Client) CreateSandbox(ctx context.Context, req SandboxRequest) (Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, "/v1/sandboxes", req)
}

// GetSandbox returns one sandbox (job.not_found when there is none).
func (c *Client) GetSandbox(ctx context.Context, id string) (Sandbox, error) {
	var s Sandbox
	return s, c.getJSON(ctx, sandboxPath(id), &s)
}

// ListSandboxes returns the sandboxes matching f, oldest first.
func (c *Client) ListSandboxes(ctx context.Context, f SandboxFilter) ([]Sandbox, error) {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", string(f.State))
	}
	keys := make([]string, 0, len(f.Metadata))
	for k := range f.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Set("metadata."+k, f.Metadata[k])
	}
	path := "/v1/sandboxes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out struct {
		Sandboxes []Sandbox `json:"sandboxes"`
	}
	return out.Sandboxes, c.getJSON(ctx, path, &out)
}

// DeleteSandbox kills a sandbox's processes and removes its workspace;
// it returns the record, stopped (an ended sandbox answers as it is).
func (c *Client) DeleteSandbox(ctx context.Context, id string) (Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodDelete, sandboxPath(id), nil)
}

// SetSandboxTimeout makes the sandbox expire timeoutS seconds from now.
func (c *Client) SetSandboxTimeout(ctx context.Context, id string, timeoutS int64) (Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, sandboxPath(id)+"/timeout", map[string]int64{"timeout_s": timeoutS})
}

// PauseSandbox freezes every process of the sandbox.
func (c *Client) PauseSandbox(ctx context.Context, id string) (Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, sandboxPath(id)+"/pause", nil)
}

// ResumeSandbox thaws a paused sandbox.
func (c *Client) ResumeSandbox(ctx context.Context, id string) (Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, sandboxPath(id)+"/resume", nil)
}

// SandboxExec runs one command in the sandbox and waits for it.
func (c *Client) SandboxExec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	var res ExecResult
	return res, c.postJSON(ctx, sandboxPath(id)+"/exec", req, &res)
}

// ReadSandboxFile writes the sandbox's file path (relative to its
// workspace) to w.
func (c *Client) ReadSandboxFile(ctx context.Context, id, path string, w io.Writer) error {
	resp, err := c.do(ctx, http.MethodGet, sandboxPath(id)+"/files?"+url.Values{"path": {path}}.Encode(), nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := notDirectory(resp, path); err != nil {
		return err
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot read the file's bytes").With("path", path)
	}
	return nil
}

// WriteSandboxFile writes data to the sandbox's file path atomically,
// creating missing parents; mode 0 is the server's default (0644).
func (c *Client) WriteSandboxFile(ctx context.Context, id, path string, data []byte, mode uint32) error {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", strconv.FormatUint(uint64(mode), 8))
	}
	resp, err := c.Do(ctx, http.MethodPut, sandboxPath(id)+"/files?"+q.Encode(), "application/octet-stream", bytes.NewReader(data), nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// sandboxCall sends body (JSON, or none when nil) and decodes the
// sandbox the server answers.
func (c *Client) sandboxCall(ctx context.Context, method, path string, body any) (Sandbox, error) {
	var s Sandbox
	if method == http.MethodPost && body != nil {
		return s, c.postJSON(ctx, path, body, &s)
	}
	resp, err := c.do(ctx, method, path, nil, nil)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// postJSON posts body as JSON and decodes the answer into out.
func (c *Client) postJSON(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return job.Wrap(job.CodeInvalidRequest, err, "cannot encode the request")
	}
	resp, err := c.do(ctx, http.MethodPost, path, b, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}
