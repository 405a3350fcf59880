// Package mcpserver exposes agent-runner to MCP clients (official Go SDK):
// sandbox.run, sandbox.status, sandbox.artifacts and sandbox.cancel. Seed
// 001 names the tool "sandbox/run"; MCP tool names may only use
// [A-Za-z0-9_.-], so the slash becomes a dot. Before a request is built the
// server refuses shell strings (unless the operator allowed shells),
// workspaces outside the operator-approved roots, and whatever a client
// asks beyond the operator's ceiling (another backend, allow_shell, a
// network); the runner then applies its own validation and policy as for
// every other door.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/jobs"
	"github.com/agent-runner/agent-runner/policy"
	"github.com/agent-runner/agent-runner/validation"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// Config configures the MCP server.
type Config struct {
	// Jobs is the jobs service sandbox.run submits to and the other tools
	// read from: serve's (for /mcp), or the plane agent-runner mcp opens.
	Jobs *jobs.Service
	// WorkspaceRoots are the directories a workspace_path must lie under.
	// With none, every sandbox.run is refused.
	WorkspaceRoots []string
	// Excluded are refused even under a root (the run store).
	Excluded []string
	// AllowShell lets argv name a shell (the request policy must still
	// allow it). Without it a client's policy.allow_shell is refused.
	AllowShell bool
	// Backend is the operator's backend kind: every job runs on it, and a
	// client may name it or leave backend out; any other kind is refused.
	// Empty leaves the runner's default and lets a client name none.
	Backend string
	Version string
}

// RunArgs are sandbox.run's arguments.
type RunArgs struct {
	WorkspacePath    string            `json:"workspace_path" jsonschema:"host directory to snapshot; must lie under an approved --workspace-root"`
	Argv             []string          `json:"argv" jsonschema:"program and arguments, never a shell string"`
	Cwd              string            `json:"cwd,omitempty" jsonschema:"working directory relative to the snapshot root"`
	Env              map[string]string `json:"env,omitempty" jsonschema:"environment additions; keys must be allowed by policy.allowed_env"`
	Policy           map[string]any    `json:"policy,omitempty" jsonschema:"RunJobRequest policy object (allowed_commands, allowed_env, artifact_globs, ...)"`
	Trace            map[string]any    `json:"trace,omitempty" jsonschema:"caller metadata echoed in the result"`
	Limits           *job.Limits       `json:"limits,omitempty" jsonschema:"RunJobRequest limits"`
	Backend          string            `json:"backend,omitempty" jsonschema:"backend kind; only the operator's backend (the default) is accepted"`
	SnapshotStrategy string            `json:"snapshot_strategy,omitempty" jsonschema:"copy or overlay"`
	Wait             *bool             `json:"wait,omitempty" jsonschema:"wait for the result (default true); false returns the queued job id"`
}

// JobArgs name one job.
type JobArgs struct {
	JobID string `json:"job_id" jsonschema:"the job id returned by sandbox.run"`
}

// JobOutput is a job's status and, once terminal, its RunJobResult.
type JobOutput struct {
	JobID  string         `json:"job_id"`
	Status string         `json:"status"`
	Result map[string]any `json:"result,omitempty" jsonschema:"the RunJobResult, present once the job is terminal"`
}

// ArtifactsOutput lists a terminal job's artifacts.
type ArtifactsOutput struct {
	JobID     string         `json:"job_id"`
	Artifacts []job.Artifact `json:"artifacts"`
}

// New builds the MCP server with the sandbox tools.
func New(cfg Config) *mcp.Server {
	if cfg.Version == "" {
		cfg.Version = "1"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "agent-runner", Version: cfg.Version}, nil)
	h := &handlers{cfg: cfg}
	mcp.AddTool(s, &mcp.Tool{Name: "sandbox.run", Description: "Run an argv in a snapshot of an approved workspace under agent-runner policy and return the RunJobResult (seed 001's sandbox/run)."}, h.run)
	mcp.AddTool(s, &mcp.Tool{Name: "sandbox.status", Description: "Status of a job, with its RunJobResult once terminal."}, h.status)
	mcp.AddTool(s, &mcp.Tool{Name: "sandbox.artifacts", Description: "Artifact metadata (path, size, sha256, storage_uri) of a terminal job."}, h.artifacts)
	mcp.AddTool(s, &mcp.Tool{Name: "sandbox.cancel", Description: "Cancel a queued or running job."}, h.cancel)
	return s
}

type handlers struct{ cfg Config }

func (h *handlers) run(ctx context.Context, _ *mcp.CallToolRequest, a RunArgs) (*mcp.CallToolResult, JobOutput, error) {
	req, err := h.request(a)
	if err != nil {
		return toolError(err), JobOutput{}, nil
	}
	acc, _, err := h.cfg.Jobs.Submit(ctx, &req)
	if err != nil {
		return toolError(err), JobOutput{}, nil
	}
	if a.Wait != nil && !*a.Wait {
		return nil, JobOutput{JobID: acc.JobID, Status: string(acc.Status)}, nil
	}
	res, err := h.cfg.Jobs.Wait(ctx, acc.JobID)
	if err != nil {
		return toolError(waitError(err)), JobOutput{}, nil
	}
	return nil, resultOutput(res), nil
}

// waitError is a wait the client's context ended: the job goes on.
func waitError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return job.Wrap(job.CodeRunCanceled, err, "stopped waiting for the job; it goes on (sandbox.status, sandbox.cancel)")
	}
	return err
}

func (h *handlers) status(ctx context.Context, _ *mcp.CallToolRequest, a JobArgs) (*mcp.CallToolResult, JobOutput, error) {
	v, err := h.cfg.Jobs.Get(ctx, a.JobID, 0)
	return viewOutput(a.JobID, v, err)
}

func viewOutput(id string, v jobs.View, err error) (*mcp.CallToolResult, JobOutput, error) {
	if err != nil {
		return toolError(err), JobOutput{}, nil
	}
	if v.Result != nil {
		return nil, resultOutput(*v.Result), nil
	}
	return nil, JobOutput{JobID: id, Status: string(v.Status.Status)}, nil
}

func (h *handlers) artifacts(_ context.Context, _ *mcp.CallToolRequest, a JobArgs) (*mcp.CallToolResult, ArtifactsOutput, error) {
	list, err := h.cfg.Jobs.Artifacts(a.JobID)
	if err != nil {
		return toolError(err), ArtifactsOutput{}, nil
	}
	return nil, ArtifactsOutput{JobID: a.JobID, Artifacts: list}, nil
}

func (h *handlers) cancel(ctx context.Context, _ *mcp.CallToolRequest, a JobArgs) (*mcp.CallToolResult, JobOutput, error) {
	v, err := h.cfg.Jobs.Cancel(ctx, a.JobID)
	return viewOutput(a.JobID, v, err)
}

// Request applies the adapter rules (no shell strings, approved workspace
// roots) and builds the RunJobRequest sandbox.run would submit.
func Request(cfg Config, a RunArgs) (job.Request, error) { return (&handlers{cfg: cfg}).request(a) }

// request checks the adapter rules and builds the RunJobRequest.
func (h *handlers) request(a RunArgs) (job.Request, error) {
	if len(a.Argv) == 0 || a.Argv[0] == "" {
		return job.Request{}, job.Errorf(job.CodeInvalidRequest, "argv must be a non-empty array")
	}
	if !h.cfg.AllowShell {
		if policy.IsShell(filepath.Base(a.Argv[0])) {
			return job.Request{}, job.Errorf(job.CodeShellDenied, "shell execution is not enabled on this MCP server").With("argv0", a.Argv[0])
		}
		if len(a.Argv) == 1 && strings.ContainsAny(a.Argv[0], " \t|;&$`<>()") {
			return job.Request{}, job.Errorf(job.CodeShellDenied, "argv[0] looks like a shell command string; pass a program and its arguments").With("argv0", a.Argv[0])
		}
	}
	if kind := validation.NormalizeKind(a.Backend); kind != "" && kind != h.cfg.Backend {
		return job.Request{}, job.Errorf(job.CodeInvalidRequest, "backend: this MCP server runs jobs only on its operator's backend %q", h.cfg.Backend).
			With("field", "backend").With("kind", kind)
	}
	ws, err := h.approved(a.WorkspacePath)
	if err != nil {
		return job.Request{}, err
	}
	req := job.Request{
		Workspace: job.Workspace{Path: ws, SnapshotStrategy: a.SnapshotStrategy},
		Command:   job.Command{Argv: a.Argv, Cwd: a.Cwd, Env: a.Env},
		Backend:   job.BackendSpec{Kind: h.cfg.Backend},
	}
	if a.Limits != nil {
		req.Limits = *a.Limits
	}
	if a.Policy != nil {
		b, _ := json.Marshal(a.Policy)
		var p job.Policy
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return job.Request{}, job.Wrap(job.CodeInvalidRequest, err, "policy is not a RunJobRequest policy")
		}
		if err := h.withinOperator(p); err != nil {
			return job.Request{}, err
		}
		req.Policy = p
	}
	if a.Trace != nil {
		b, _ := json.Marshal(a.Trace)
		req.Trace = job.Trace(b)
	}
	return req, nil
}

// withinOperator refuses a client policy that grants more than the
// operator allowed: a shell without AllowShell, any network but disabled.
func (h *handlers) withinOperator(p job.Policy) error {
	if p.AllowShell && !h.cfg.AllowShell {
		return job.Errorf(job.CodeShellDenied, "policy.allow_shell: shell execution is not enabled on this MCP server").With("field", "policy.allow_shell")
	}
	if p.Network != "" && p.Network != job.NetworkDisabled {
		return job.Errorf(job.CodeNetworkDenied, "policy.network: this MCP server runs jobs with the network disabled").
			With("field", "policy.network").With("network", p.Network)
	}
	return nil
}

// approved resolves the workspace (symlinks included) and requires it to
// lie under an operator-approved root, away from the run store.
func (h *handlers) approved(path string) (string, error) {
	return workspaceroot.Roots{Dirs: h.cfg.WorkspaceRoots, Excluded: h.cfg.Excluded}.Check(path)
}

// resultOutput renders a terminal result.
func resultOutput(res job.Result) JobOutput {
	b, _ := json.Marshal(res)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return JobOutput{JobID: res.JobID, Status: string(res.Status), Result: m}
}

// toolError is the one place job errors become MCP tool errors: IsError
// with the stable error object as JSON text, so the model can read it.
func toolError(err error) *mcp.CallToolResult {
	b, _ := json.Marshal(map[string]any{"error": job.AsError(err)})
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}
