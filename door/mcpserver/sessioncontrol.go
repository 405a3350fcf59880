package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/session"
)

// The kept-sandbox tools beside the five that use one (sessions.go):
// sandbox.list, sandbox.pause, sandbox.resume, sandbox.set_timeout and
// sandbox.list_files, each the sessions route of the same name's call
// (docs/sessions.md), under the same sessions scope.

// ListArgs select sandboxes as GET /v1/sandboxes does.
type ListArgs struct {
	State    string            `json:"state,omitempty" jsonschema:"only sandboxes in this state (starting, running, paused, stopped, failed, expired)"`
	Metadata map[string]string `json:"metadata,omitempty" jsonschema:"only sandboxes whose metadata holds every one of these pairs"`
}

// ListOutput is sandbox.list's answer, oldest first.
type ListOutput struct {
	Sandboxes []session.Record `json:"sandboxes"`
}

// TimeoutArgs are sandbox.set_timeout's arguments.
type TimeoutArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id sandbox.create returned"`
	TimeoutS  int64  `json:"timeout_s" jsonschema:"seconds from now until the sandbox expires (at most the server's maximum)"`
}

// ListFilesArgs name a directory of a sandbox.
type ListFilesArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id sandbox.create returned"`
	Path      string `json:"path,omitempty" jsonschema:"directory relative to the sandbox's workspace (default: its root)"`
}

func (h *handlers) addSessionControlTools(s *mcp.Server) {
	addTool(s, &mcp.Tool{Name: "sandbox.list", Description: "List kept sandboxes, oldest first, optionally by state and metadata pairs."}, h.list)
	addTool(s, &mcp.Tool{Name: "sandbox.pause", Description: "Freeze every process of a kept sandbox until sandbox.resume; its files can still be read."}, h.pause)
	addTool(s, &mcp.Tool{Name: "sandbox.resume", Description: "Thaw a paused kept sandbox."}, h.resume)
	addTool(s, &mcp.Tool{Name: "sandbox.set_timeout", Description: "Make a kept sandbox expire timeout_s seconds from now."}, h.setTimeout)
	addTool(s, &mcp.Tool{Name: "sandbox.list_files", Description: "List a directory of a kept sandbox's workspace: name, path, type (file, dir, symlink, other), size, mode, modified_at; symlinks are listed, never followed."}, h.listFiles)
}

func (h *handlers) list(_ context.Context, call *mcp.CallToolRequest, a ListArgs) (ListOutput, error) {
	s, err := h.sessions(call)
	if err != nil {
		return ListOutput{}, err
	}
	recs, err := s.List(session.Filter{State: session.State(a.State), Metadata: a.Metadata})
	if recs == nil {
		recs = []session.Record{}
	}
	return ListOutput{Sandboxes: recs}, err
}

func (h *handlers) pause(ctx context.Context, call *mcp.CallToolRequest, a SandboxArgs) (session.Record, error) {
	s, err := h.sessions(call)
	if err != nil {
		return session.Record{}, err
	}
	return s.Pause(ctx, a.SandboxID)
}

func (h *handlers) resume(ctx context.Context, call *mcp.CallToolRequest, a SandboxArgs) (session.Record, error) {
	s, err := h.sessions(call)
	if err != nil {
		return session.Record{}, err
	}
	return s.Resume(ctx, a.SandboxID)
}

func (h *handlers) setTimeout(_ context.Context, call *mcp.CallToolRequest, a TimeoutArgs) (session.Record, error) {
	s, err := h.sessions(call)
	if err != nil {
		return session.Record{}, err
	}
	return s.SetTimeout(a.SandboxID, a.TimeoutS)
}

func (h *handlers) listFiles(ctx context.Context, call *mcp.CallToolRequest, a ListFilesArgs) (session.Listing, error) {
	s, err := h.sessions(call)
	if err != nil {
		return session.Listing{}, err
	}
	return s.ListFiles(ctx, a.SandboxID, a.Path)
}
