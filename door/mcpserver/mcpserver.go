// Package mcpserver exposes agent-runner to MCP clients (official Go SDK):
// sandbox.run, sandbox.status, sandbox.artifacts and sandbox.cancel, and,
// given a session service, the kept-sandbox tools sandbox.create,
// sandbox.exec, sandbox.read_file, sandbox.write_file and
// sandbox.destroy (sessions.go), with sandbox.list, sandbox.pause,
// sandbox.resume, sandbox.set_timeout and sandbox.list_files
// (sessioncontrol.go). Seed
// 001 names the tool "sandbox/run"; MCP tool names may only use
// [A-Za-z0-9_.-], so the slash becomes a dot. Before a request is built the
// server refuses shell strings (unless the operator allowed shells),
// workspaces outside the operator-approved roots, and whatever a client
// asks beyond the operator's ceiling (another backend, allow_shell, a
// network); the runner then applies its own validation and policy as for
// every other door. sandbox.run takes what a RunJobRequest's workspace and
// limits take (readonly_mounts, caches, timeout_ms, memory_mb, ...). Every
// tool error, a bad argument included, is IsError with the HTTP API's
// {"error": {code, message, details}} as structured content and text.
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
	"github.com/agent-runner/agent-runner/session"
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
	// CacheNamespace names the build-cache namespace (buildcache) of the
	// caller of one tool call, the namespace a sandbox.run's
	// workspace.caches live in: `agent-runner mcp` (stdio, this host's own
	// user) answers buildcache.LocalNamespace, serve's /mcp the bearer
	// token's (buildcache.TokenNamespace). nil, or "", refuses caches, as
	// jobs.Service.Submit does.
	CacheNamespace func(*mcp.CallToolRequest) (string, error)
	// Sessions is the session service of the kept-sandbox tools
	// (sandbox.create, sandbox.exec, sandbox.read_file,
	// sandbox.write_file, sandbox.destroy): serve's, for /mcp. nil
	// leaves those tools out.
	Sessions *session.Service
	// Authorize checks that a tool call's caller holds scope (serve's
	// bearer tokens: the kept-sandbox tools need "sessions"); nil allows
	// every call.
	Authorize func(call *mcp.CallToolRequest, scope string) error
	Version   string
}

// RunArgs are sandbox.run's arguments: a RunJobRequest's workspace,
// command, policy, limits and trace, flattened (workspace_path is
// workspace.path), checked by the same validation as every other door.
type RunArgs struct {
	WorkspacePath      string            `json:"workspace_path" jsonschema:"host directory to snapshot (workspace.path); must lie under an approved --workspace-root"`
	Argv               []string          `json:"argv" jsonschema:"program and arguments, never a shell string"`
	Cwd                string            `json:"cwd,omitempty" jsonschema:"working directory relative to the snapshot root"`
	Env                map[string]string `json:"env,omitempty" jsonschema:"environment additions; keys must be allowed by policy.allowed_env"`
	Policy             map[string]any    `json:"policy,omitempty" jsonschema:"RunJobRequest policy object (allowed_commands, allowed_env, artifact_globs, ...)"`
	Trace              map[string]any    `json:"trace,omitempty" jsonschema:"caller metadata echoed in the result"`
	Limits             *job.Limits       `json:"limits,omitempty" jsonschema:"RunJobRequest limits (timeout_ms, memory_mb, cpu_count, max_processes, max_stdout_bytes, ...); zero or absent means the runner default"`
	Backend            string            `json:"backend,omitempty" jsonschema:"backend kind; only the operator's backend (the default) is accepted"`
	SnapshotStrategy   string            `json:"snapshot_strategy,omitempty" jsonschema:"copy or overlay (workspace.snapshot_strategy)"`
	Include            []string          `json:"include,omitempty" jsonschema:"workspace.include: globs of the files to snapshot"`
	Exclude            []string          `json:"exclude,omitempty" jsonschema:"workspace.exclude: globs of the files left out of the snapshot"`
	ReadOnlyMounts     []string          `json:"readonly_mounts,omitempty" jsonschema:"workspace.readonly_mounts: directories of the workspace (node_modules, .venv) bound read-only in place instead of copied"`
	ReadOnlyMountsMode string            `json:"readonly_mounts_mode,omitempty" jsonschema:"workspace.readonly_mounts_mode: readonly (default) or copy_on_write (the job may write into them, in a layer of its own that never reaches the host)"`
	Caches             []job.Cache       `json:"caches,omitempty" jsonschema:"workspace.caches: named build caches kept across jobs, each mounted read-write at an absolute sandbox path"`
	Wait               *bool             `json:"wait,omitempty" jsonschema:"wait for the result (default true); false returns the queued job id"`
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
	addTool(s, &mcp.Tool{Name: "sandbox.run", Description: "Run an argv in a snapshot of an approved workspace under agent-runner policy and return the RunJobResult (seed 001's sandbox/run)."}, h.run)
	addTool(s, &mcp.Tool{Name: "sandbox.status", Description: "Status of a job, with its RunJobResult once terminal."}, h.status)
	addTool(s, &mcp.Tool{Name: "sandbox.artifacts", Description: "Artifact metadata (path, size, sha256, storage_uri) of a terminal job."}, h.artifacts)
	addTool(s, &mcp.Tool{Name: "sandbox.cancel", Description: "Cancel a queued or running job."}, h.cancel)
	if cfg.Sessions != nil {
		h.addSessionTools(s)
		h.addSessionControlTools(s)
	}
	return s
}

type handlers struct{ cfg Config }

func (h *handlers) run(ctx context.Context, call *mcp.CallToolRequest, a RunArgs) (JobOutput, error) {
	req, err := h.request(a)
	if err != nil {
		return JobOutput{}, err
	}
	acc, err := h.submit(ctx, call, &req)
	if err != nil {
		return JobOutput{}, err
	}
	if a.Wait != nil && !*a.Wait {
		return JobOutput{JobID: acc.JobID, Status: string(acc.Status)}, nil
	}
	res, err := h.cfg.Jobs.Wait(ctx, acc.JobID)
	if err != nil {
		return JobOutput{}, waitError(err)
	}
	return resultOutput(res), nil
}

// submit queues a sandbox.run request on behalf of the tool call's
// caller: its build caches live in the namespace Config.CacheNamespace
// names (the one place an MCP job's namespace is chosen).
func (h *handlers) submit(ctx context.Context, call *mcp.CallToolRequest, req *job.Request) (jobs.Accepted, error) {
	var ns string
	if h.cfg.CacheNamespace != nil {
		var err error
		if ns, err = h.cfg.CacheNamespace(call); err != nil {
			return jobs.Accepted{}, err
		}
	}
	acc, _, err := h.cfg.Jobs.SubmitAs(ctx, ns, req)
	return acc, err
}

// waitError is a wait the client's context ended: the job goes on.
func waitError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return job.Wrap(job.CodeRunCanceled, err, "stopped waiting for the job; it goes on (sandbox.status, sandbox.cancel)")
	}
	return err
}

func (h *handlers) status(ctx context.Context, _ *mcp.CallToolRequest, a JobArgs) (JobOutput, error) {
	v, err := h.cfg.Jobs.Get(ctx, a.JobID, 0)
	return viewOutput(a.JobID, v, err)
}

func viewOutput(id string, v jobs.View, err error) (JobOutput, error) {
	if err != nil {
		return JobOutput{}, err
	}
	if v.Result != nil {
		return resultOutput(*v.Result), nil
	}
	return JobOutput{JobID: id, Status: string(v.Status.Status)}, nil
}

func (h *handlers) artifacts(_ context.Context, _ *mcp.CallToolRequest, a JobArgs) (ArtifactsOutput, error) {
	list, err := h.cfg.Jobs.Artifacts(a.JobID)
	if err != nil {
		return ArtifactsOutput{}, err
	}
	return ArtifactsOutput{JobID: a.JobID, Artifacts: list}, nil
}

func (h *handlers) cancel(ctx context.Context, _ *mcp.CallToolRequest, a JobArgs) (JobOutput, error) {
	v, err := h.cfg.Jobs.Cancel(ctx, a.JobID)
	return viewOutput(a.JobID, v, err)
}

// Request applies the adapter rules (no shell strings, approved workspace
// roots) and builds the RunJobRequest sandbox.run would submit.
func Request(cfg Config, a RunArgs) (job.Request, error) { return (&handlers{cfg: cfg}).request(a) }

// request checks the adapter rules and builds the RunJobRequest.
func (h *handlers) request(a RunArgs) (job.Request, error) {
	if err := h.argvAllowed(a.Argv); err != nil {
		return job.Request{}, err
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
		Workspace: job.Workspace{
			Path: ws, SnapshotStrategy: a.SnapshotStrategy,
			Include: a.Include, Exclude: a.Exclude,
			ReadOnlyMounts: a.ReadOnlyMounts, ReadOnlyMountsMode: a.ReadOnlyMountsMode, Caches: a.Caches,
		},
		Command: job.Command{Argv: a.Argv, Cwd: a.Cwd, Env: a.Env},
		Backend: job.BackendSpec{Kind: h.cfg.Backend},
	}
	if a.Limits != nil {
		req.Limits = *a.Limits
	}
	if a.Policy != nil {
		p, err := decodePolicy(a.Policy)
		if err != nil {
			return job.Request{}, err
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

// argvAllowed refuses an empty argv and, without AllowShell, a shell or
// a shell command string in argv[0].
func (h *handlers) argvAllowed(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return job.Errorf(job.CodeInvalidRequest, "argv must be a non-empty array").With("field", "argv")
	}
	if !h.cfg.AllowShell {
		if policy.IsShell(filepath.Base(argv[0])) {
			return job.Errorf(job.CodeShellDenied, "shell execution is not enabled on this MCP server").With("argv0", argv[0])
		}
		if len(argv) == 1 && strings.ContainsAny(argv[0], " \t|;&$`<>()") {
			return job.Errorf(job.CodeShellDenied, "argv[0] looks like a shell command string; pass a program and its arguments").With("argv0", argv[0])
		}
	}
	return nil
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
