// Package gateway is the agent tool gateway: typed tools whose arguments
// are decoded strictly, checked against the compiled manifest policy before
// any I/O, executed, and recorded in the audit log. File tools open paths
// through rootfs (file descriptors, no symlinks); subprocess tools become
// job requests run by the runner pipeline, never processes of their own.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sort"
	"sync"

	"github.com/agent-runner/agent-runner/agent/audit"
	"github.com/agent-runner/agent-runner/agent/manifest"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// JobRunner runs subprocess tools; *runner.Runner implements it.
type JobRunner interface {
	Run(ctx context.Context, req job.Request, opts runner.Options) (job.Result, error)
}

var _ JobRunner = (*runner.Runner)(nil)

// ErrLimit is returned (as a *job.Error with validation.limit_exceeded) once
// the manifest's max_tool_calls is used up; denied calls count too.
var ErrLimit = errors.New("tool call limit reached")

// ToolInfo describes one tool for a model or an MCP client.
type ToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Gateway dispatches tool calls under one policy. It is safe for
// concurrent use.
type Gateway struct {
	policy  *manifest.Policy
	audit   *audit.Log
	jobs    JobRunner
	cwd     string
	backend string
	log     *slog.Logger

	mu    sync.Mutex
	calls int64
}

// Option configures a Gateway.
type Option func(*Gateway)

// WithCwd sets the directory relative tool paths are resolved against
// (default: the process working directory).
func WithCwd(dir string) Option { return func(g *Gateway) { g.cwd = dir } }

// WithBackend sets the backend kind subprocess tools run on (default
// linux_sandbox). When it is unavailable a tool call fails with
// backend.unavailable; there is no fallback. local_process isolates
// nothing: configure it only on the operator's explicit say-so.
func WithBackend(kind string) Option { return func(g *Gateway) { g.backend = kind } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(g *Gateway) { g.log = l } }

// New returns a gateway for p. auditLog may be nil (no audit); jobs may be
// nil, in which case subprocess tools fail with backend.unavailable.
func New(p *manifest.Policy, auditLog *audit.Log, jobs JobRunner, opts ...Option) *Gateway {
	g := &Gateway{policy: p, audit: auditLog, jobs: jobs}
	for _, o := range opts {
		o(g)
	}
	if g.cwd == "" {
		g.cwd, _ = os.Getwd()
	}
	if g.backend == "" {
		g.backend = BackendSandbox
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.log = g.log.With("component", "gateway", "agent", p.Name)
	return g
}

// Policy returns the compiled policy.
func (g *Gateway) Policy() *manifest.Policy { return g.policy }

// CallsUsed is the number of tool calls made so far, denied ones included.
func (g *Gateway) CallsUsed() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// Tools lists the tools the policy grants, sorted by name. git_status is
// left out when capabilities.git is false, since every call would be
// denied.
func (g *Gateway) Tools() []ToolInfo {
	var out []ToolInfo
	for _, t := range tools {
		if t.name == manifest.ToolGitStatus && !g.policy.Git {
			continue
		}
		if g.policy.Allows(t.name) {
			out = append(out, ToolInfo{Name: t.name, Description: t.description, InputSchema: t.schema})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Invoke runs one tool call: count it, decode args, check policy, audit the
// decision, execute, audit the result. A denial or failure is a *job.Error.
func (g *Gateway) Invoke(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	args = normalizeArgs(args)
	g.mu.Lock()
	g.calls++
	n := g.calls
	g.mu.Unlock()
	if n > g.policy.Limits.MaxToolCalls {
		err := job.Wrap(job.CodeLimitExceeded, ErrLimit, "max_tool_calls reached").
			With("max_tool_calls", g.policy.Limits.MaxToolCalls)
		g.record(audit.Event{Event: audit.EventToolCall, Call: n, Tool: name, Args: args, Allowed: audit.Bool(false), Reason: err.Message, Code: string(err.Code)})
		return nil, err
	}
	run, jerr := g.check(name, args)
	if jerr != nil {
		g.log.Info("tool denied", "tool", name, "code", jerr.Code)
		g.record(audit.Event{Event: audit.EventToolCall, Call: n, Tool: name, Args: args, Allowed: audit.Bool(false), Reason: jerr.Message, Code: string(jerr.Code)})
		return nil, jerr
	}
	g.record(audit.Event{Event: audit.EventToolCall, Call: n, Tool: name, Args: args, Allowed: audit.Bool(true), Reason: "allowed by policy"})
	res, err := run(context.WithValue(ctx, callKey{}, n))
	if err != nil {
		e := job.AsError(err)
		g.record(audit.Event{Event: audit.EventToolResult, Call: n, Tool: name, OK: audit.Bool(false), Code: string(e.Code), Error: e.Message})
		return nil, e
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, job.Wrap(job.CodeInternal, err, "encode tool result")
	}
	g.record(audit.Event{Event: audit.EventToolResult, Call: n, Tool: name, OK: audit.Bool(true), Result: auditResult(out)})
	return out, nil
}

// callKey is the context key of the call number Invoke runs a tool under.
type callKey struct{}

// CallOf is the number of the tool call ctx belongs to (the audit's
// call, 1 for the first), as the JobRunner of a subprocess tool sees
// it; 0 outside a call.
func CallOf(ctx context.Context) int64 {
	n, _ := ctx.Value(callKey{}).(int64)
	return n
}

// check is the policy step: no I/O happens before it returns an executor.
func (g *Gateway) check(name string, args json.RawMessage) (func(context.Context) (any, error), *job.Error) {
	t, ok := toolByName(name)
	if !ok {
		return nil, job.Errorf(job.CodeToolDenied, "unknown tool %q", name).With("tool", name)
	}
	if !g.policy.Allows(name) {
		return nil, job.Errorf(job.CodeToolDenied, "tool %q is not granted by the manifest", name).With("tool", name)
	}
	return t.plan(g, args)
}

func (g *Gateway) record(e audit.Event) {
	if g.audit == nil {
		return
	}
	if err := g.audit.Append(e); err != nil {
		g.log.Error("audit append failed", "err", err)
	}
}

// MaxAuditResultBytes bounds a tool result stored inline in the audit log;
// larger results are recorded by size and sha256.
const MaxAuditResultBytes = 4096

func auditResult(out []byte) json.RawMessage {
	if len(out) <= MaxAuditResultBytes {
		return out
	}
	b, _ := json.Marshal(map[string]any{"elided": true, "bytes": len(out), "sha256": audit.LineSHA256(out)})
	return b
}

func normalizeArgs(args json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		return json.RawMessage(`{}`)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, args) == nil {
		return buf.Bytes()
	}
	// Not JSON (a model's malformed arguments): keep it as a JSON string so
	// the audit line stays valid; decoding it into the args struct fails.
	b, _ := json.Marshal(string(args))
	return b
}
