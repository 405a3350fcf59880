package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"io/fs"
	"strconv"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/validation"
)

// The kept-sandbox tools (docs/sessions.md), registered when
// Config.Sessions is set: sandbox.create, sandbox.exec,
// sandbox.read_file, sandbox.write_file and sandbox.destroy. Each call
// needs the sessions scope (Config.Authorize), and holds the same
// adapter rules as sandbox.run: no shell argv without AllowShell, the
// operator's backend only, no network beyond disabled.

// CreateArgs are sandbox.create's arguments: POST /v1/sandboxes's
// request, with workspace.path flattened to workspace_path.
type CreateArgs struct {
	ID            string            `json:"id,omitempty" jsonschema:"the sandbox's id (default: minted, sbx_...); the same id with the same arguments answers the existing sandbox"`
	WorkspacePath string            `json:"workspace_path,omitempty" jsonschema:"host directory to copy as the sandbox's workspace; must lie under an approved --workspace-root (default: an empty workspace)"`
	Limits        session.Limits    `json:"limits,omitempty" jsonschema:"memory_mb, cpu_count, max_processes, tmp_mb for all the sandbox's processes together"`
	Policy        map[string]any    `json:"policy,omitempty" jsonschema:"exec policy of every exec (allowed_commands, allowed_env, allow_shell)"`
	TimeoutS      int64             `json:"timeout_s,omitempty" jsonschema:"seconds until the sandbox expires (default: the server's)"`
	Metadata      map[string]string `json:"metadata,omitempty" jsonschema:"caller labels, listed with the sandbox"`
	Backend       string            `json:"backend,omitempty" jsonschema:"backend kind; only the operator's backend (the default) is accepted"`
}

// SandboxArgs name one sandbox.
type SandboxArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id sandbox.create returned"`
}

// ExecArgs are sandbox.exec's arguments.
type ExecArgs struct {
	SandboxID string            `json:"sandbox_id" jsonschema:"the id sandbox.create returned"`
	Argv      []string          `json:"argv" jsonschema:"program and arguments, never a shell string"`
	Cwd       string            `json:"cwd,omitempty" jsonschema:"working directory relative to the workspace"`
	Env       map[string]string `json:"env,omitempty" jsonschema:"environment additions"`
	Stdin     string            `json:"stdin,omitempty" jsonschema:"bytes given to the command on stdin"`
	TimeoutS  int64             `json:"timeout_s,omitempty" jsonschema:"the command's timeout in seconds (default 120, at most 3600)"`
}

// FileArgs name one file of a sandbox.
type FileArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id sandbox.create returned"`
	Path      string `json:"path" jsonschema:"file path relative to the sandbox's workspace"`
}

// WriteFileArgs are sandbox.write_file's arguments: text in content, or
// any bytes in base64.
type WriteFileArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id sandbox.create returned"`
	Path      string `json:"path" jsonschema:"file path relative to the sandbox's workspace; missing parents are created"`
	Content   string `json:"content,omitempty" jsonschema:"the file's text (UTF-8)"`
	Base64    string `json:"base64,omitempty" jsonschema:"the file's bytes, base64 (instead of content)"`
	Mode      string `json:"mode,omitempty" jsonschema:"octal permission bits (644, 755); default 644"`
}

// FileOutput is a file read or written: its text in Content when it is
// UTF-8, else its bytes in Base64.
type FileOutput struct {
	SandboxID string `json:"sandbox_id"`
	Path      string `json:"path"`
	SizeBytes int    `json:"size_bytes"`
	Content   string `json:"content,omitempty"`
	Base64    string `json:"base64,omitempty"`
}

func (h *handlers) addSessionTools(s *mcp.Server) {
	addTool(s, &mcp.Tool{Name: "sandbox.create", Description: "Create a kept sandbox (docs/sessions.md): a workspace, empty or a copy of an approved directory, kept until sandbox.destroy or its timeout; returns its record."}, h.create)
	addTool(s, &mcp.Tool{Name: "sandbox.exec", Description: "Run an argv in a kept sandbox and wait: {run_id, status, exit_code, stdout, stderr, truncated, duration_ms, error?}. Files persist between execs."}, h.exec)
	addTool(s, &mcp.Tool{Name: "sandbox.read_file", Description: "Read a file of a kept sandbox's workspace: its text in content, or its bytes in base64."}, h.readFile)
	addTool(s, &mcp.Tool{Name: "sandbox.write_file", Description: "Write a file into a kept sandbox's workspace, atomically, creating missing parents."}, h.writeFile)
	addTool(s, &mcp.Tool{Name: "sandbox.destroy", Description: "Delete a kept sandbox: its processes are killed and its workspace removed; returns its record, stopped."}, h.destroy)
}

// sessions checks the call's caller may use kept sandboxes.
func (h *handlers) sessions(call *mcp.CallToolRequest) (*session.Service, error) {
	if h.cfg.Authorize != nil {
		if err := h.cfg.Authorize(call, auth.ScopeSessions); err != nil {
			return nil, err
		}
	}
	return h.cfg.Sessions, nil
}

func (h *handlers) create(ctx context.Context, call *mcp.CallToolRequest, a CreateArgs) (session.Record, error) {
	s, err := h.sessions(call)
	if err != nil {
		return session.Record{}, err
	}
	if kind := validation.NormalizeKind(a.Backend); kind != "" && kind != h.cfg.Backend {
		return session.Record{}, job.Errorf(job.CodeInvalidRequest, "backend: this MCP server keeps sandboxes only on its operator's backend %q", h.cfg.Backend).
			With("field", "backend").With("kind", kind)
	}
	req := session.CreateRequest{ID: a.ID, Backend: h.cfg.Backend, Limits: a.Limits, TimeoutS: a.TimeoutS, Metadata: a.Metadata}
	if a.WorkspacePath != "" {
		ws, err := h.approved(a.WorkspacePath)
		if err != nil {
			return session.Record{}, err
		}
		req.Workspace = &session.Workspace{Path: ws}
	}
	if a.Policy != nil {
		p, err := decodePolicy(a.Policy)
		if err != nil {
			return session.Record{}, err
		}
		if err := h.withinOperator(p); err != nil {
			return session.Record{}, err
		}
		req.Policy = &p
	}
	rec, _, err := s.Create(ctx, req)
	return rec, err
}

func (h *handlers) exec(ctx context.Context, call *mcp.CallToolRequest, a ExecArgs) (session.ExecResult, error) {
	s, err := h.sessions(call)
	if err != nil {
		return session.ExecResult{}, err
	}
	if err := h.argvAllowed(a.Argv); err != nil {
		return session.ExecResult{}, err
	}
	return s.Exec(ctx, a.SandboxID, session.ExecRequest{Argv: a.Argv, Cwd: a.Cwd, Env: a.Env, Stdin: a.Stdin, TimeoutS: a.TimeoutS})
}

func (h *handlers) readFile(ctx context.Context, call *mcp.CallToolRequest, a FileArgs) (FileOutput, error) {
	s, err := h.sessions(call)
	if err != nil {
		return FileOutput{}, err
	}
	var buf bytes.Buffer
	if err := s.ReadFile(ctx, a.SandboxID, a.Path, &buf); err != nil {
		return FileOutput{}, err
	}
	out := FileOutput{SandboxID: a.SandboxID, Path: a.Path, SizeBytes: buf.Len()}
	if utf8.Valid(buf.Bytes()) {
		out.Content = buf.String()
	} else {
		out.Base64 = base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	return out, nil
}

func (h *handlers) writeFile(ctx context.Context, call *mcp.CallToolRequest, a WriteFileArgs) (FileOutput, error) {
	s, err := h.sessions(call)
	if err != nil {
		return FileOutput{}, err
	}
	data := []byte(a.Content)
	if a.Base64 != "" {
		if a.Content != "" {
			return FileOutput{}, job.Errorf(job.CodeInvalidRequest, "give content or base64, not both").With("field", "base64")
		}
		if data, err = base64.StdEncoding.DecodeString(a.Base64); err != nil {
			return FileOutput{}, job.Wrap(job.CodeInvalidRequest, err, "base64 is not standard base64").With("field", "base64")
		}
	}
	mode, err := fileMode(a.Mode)
	if err != nil {
		return FileOutput{}, err
	}
	if err := s.WriteFile(ctx, a.SandboxID, a.Path, data, mode); err != nil {
		return FileOutput{}, err
	}
	return FileOutput{SandboxID: a.SandboxID, Path: a.Path, SizeBytes: len(data)}, nil
}

func (h *handlers) destroy(ctx context.Context, call *mcp.CallToolRequest, a SandboxArgs) (session.Record, error) {
	s, err := h.sessions(call)
	if err != nil {
		return session.Record{}, err
	}
	return s.Delete(ctx, a.SandboxID)
}

// fileMode parses octal permission bits ("" is 0644).
func fileMode(m string) (fs.FileMode, error) {
	if m == "" {
		return 0o644, nil
	}
	v, err := strconv.ParseUint(m, 8, 32)
	if err != nil || v > 0o777 {
		return 0, job.Errorf(job.CodeInvalidRequest, "mode must be octal permission bits (644, 0755)").With("field", "mode")
	}
	return fs.FileMode(v), nil
}
