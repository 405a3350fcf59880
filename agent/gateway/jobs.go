package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/agent/manifest"
	"github.com/agent-runner/agent-runner/agent/rootfs"
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// RunTestsArgs are run_tests arguments.
type RunTestsArgs struct {
	Command          string   `json:"command" desc:"absolute path of an allowlisted executable"`
	WorkingDirectory string   `json:"working_directory" desc:"directory under a read root; the command runs in it, read-only unless it lies in a write root"`
	Args             []string `json:"args,omitempty" desc:"arguments passed to the command"`
}

// GitStatusArgs are git_status arguments; the git arguments are fixed.
type GitStatusArgs struct {
	Command          string `json:"command,omitempty" desc:"absolute path of the allowlisted git binary (default: the allowlisted git)"`
	WorkingDirectory string `json:"working_directory" desc:"repository directory under a read root"`
}

// JobToolResult is the result of a subprocess tool: the job's outcome.
type JobToolResult struct {
	JobID           string     `json:"job_id"`
	Status          job.Status `json:"status"`
	ExitCode        *int       `json:"exit_code"`
	Stdout          string     `json:"stdout"`
	Stderr          string     `json:"stderr"`
	StdoutTruncated bool       `json:"stdout_truncated,omitempty"`
	StderrTruncated bool       `json:"stderr_truncated,omitempty"`
	Backend         string     `json:"backend"`
	// BackendNote says when the job ran unisolated (local_process, only
	// when the operator configured it) or when a write root was missing.
	BackendNote string `json:"backend_note,omitempty"`
	// Sandbox names the sandbox the call ran in, when it was a process
	// of one the run holds (every subprocess tool call of a capability
	// run: launch.Session): the same for each call of a run.
	Sandbox string     `json:"sandbox,omitempty"`
	Error   *job.Error `json:"error,omitempty"`
}

// MaxJobOutputBytes caps each stream returned to the agent.
const MaxJobOutputBytes = 64 << 10

// Backend kinds: subprocess tools run on BackendSandbox unless the
// operator configured another with WithBackend; never on a fallback.
const (
	BackendSandbox = "linux_sandbox"
	BackendLocal   = "local_process"
)

// gitArgs is git_status's fixed argument profile.
var gitArgs = []string{"status", "--porcelain=v1", "--branch", "--untracked-files=normal"}

// gitEnv keeps git from writing lock files and from refusing a repository
// owned by another uid (the sandbox maps ids).
var gitEnv = map[string]string{
	"GIT_OPTIONAL_LOCKS":  "0",
	"GIT_CONFIG_NOSYSTEM": "1",
	"GIT_CONFIG_COUNT":    "1",
	"GIT_CONFIG_KEY_0":    "safe.directory",
	"GIT_CONFIG_VALUE_0":  "*",
}

func (g *Gateway) checkCommand(cmd string) (manifest.PinnedCommand, *job.Error) {
	if cmd == "" {
		return manifest.PinnedCommand{}, job.Errorf(job.CodeInvalidRequest, "command must not be empty")
	}
	if !filepath.IsAbs(cmd) || filepath.Clean(cmd) != cmd {
		return manifest.PinnedCommand{}, job.Errorf(job.CodeCommandDenied, "command %q must be a clean absolute path on the allowlist", cmd).With("command", cmd)
	}
	pc, ok := g.policy.Command(cmd)
	if !ok {
		return pc, job.Errorf(job.CodeCommandDenied, "command %q is not on the manifest's command allowlist", cmd).With("command", cmd)
	}
	return pc, nil
}

// run_tests argument bounds.
const (
	MaxArgs     = 256
	MaxArgBytes = 4096
)

func runTests(g *Gateway, a *RunTestsArgs) (func(context.Context) (JobToolResult, error), *job.Error) {
	if len(a.Args) > MaxArgs {
		return nil, job.Errorf(job.CodeInvalidRequest, "at most %d args", MaxArgs)
	}
	for i, arg := range a.Args {
		if len(arg) > MaxArgBytes || strings.ContainsRune(arg, 0) {
			return nil, job.Errorf(job.CodeInvalidRequest, "args[%d] is longer than %d bytes or contains NUL", i, MaxArgBytes)
		}
	}
	pc, jerr := g.checkCommand(a.Command)
	if jerr != nil {
		return nil, jerr
	}
	loc, jerr := g.locateRead("working_directory", a.WorkingDirectory)
	if jerr != nil {
		return nil, jerr
	}
	argv := append([]string{pc.Path}, a.Args...)
	return func(ctx context.Context) (JobToolResult, error) {
		return g.runJob(ctx, pc, loc, a.WorkingDirectory, argv, nil)
	}, nil
}

func gitStatus(g *Gateway, a *GitStatusArgs) (func(context.Context) (JobToolResult, error), *job.Error) {
	if !g.policy.Git {
		return nil, job.Errorf(job.CodeToolDenied, "git_status needs capabilities.git: true")
	}
	if a.Command == "" {
		for _, c := range g.policy.Commands {
			if c.Basename == "git" {
				a.Command = c.Path
				break
			}
		}
	}
	pc, jerr := g.checkCommand(a.Command)
	if jerr != nil {
		return nil, jerr
	}
	if pc.Basename != "git" {
		return nil, job.Errorf(job.CodeCommandDenied, "git_status runs only an allowlisted git binary, not %q", a.Command).With("command", a.Command)
	}
	loc, jerr := g.locateRead("working_directory", a.WorkingDirectory)
	if jerr != nil {
		return nil, jerr
	}
	// The snapshot never copies .git, so git reads the repository through
	// the read-only view of the read root at its host path.
	argv := append([]string{pc.Path, "-C", loc.Abs()}, gitArgs...)
	return func(ctx context.Context) (JobToolResult, error) {
		return g.runJob(ctx, pc, loc, a.WorkingDirectory, argv, gitEnv)
	}, nil
}

// runJob verifies the working directory through rootfs (a directory, no
// symlinks on the way), then builds and runs the job request.
func (g *Gateway) runJob(ctx context.Context, pc manifest.PinnedCommand, loc rootfs.Location, shown string, argv []string, env map[string]string) (JobToolResult, error) {
	if g.jobs == nil {
		return JobToolResult{}, job.Errorf(job.CodeBackendUnavail, "no job runner is configured for subprocess tools")
	}
	d, err := rootfs.Open(loc, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return JobToolResult{}, openErr("working_directory", shown, err)
	}
	d.Close()
	kind, note, jerr := g.backendKind(ctx)
	if jerr != nil {
		return JobToolResult{}, jerr
	}
	readOnly, writable, missing := g.existingRoots()
	if len(missing) > 0 {
		note = strings.TrimSpace(note + " write roots not present, not mounted: " + strings.Join(missing, ", "))
	}
	req := g.jobRequest(ctx, pc, loc.Abs(), argv, env, kind)
	res, err := g.jobs.Run(ctx, req, runner.Options{ReadOnly: readOnly, Writable: writable, Attempt: 1})
	if err != nil {
		return JobToolResult{}, err
	}
	out := JobToolResult{
		JobID: res.JobID, Status: res.Status, ExitCode: res.ExitCode, Backend: res.Backend,
		BackendNote: note, Sandbox: res.Sandbox, Error: res.Error,
	}
	out.Stdout, out.StdoutTruncated = capText(res.Stdout)
	out.Stderr, out.StderrTruncated = capText(res.Stderr)
	return out, nil
}

func capText(o job.Output) (string, bool) {
	if len(o.Text) > MaxJobOutputBytes {
		return o.Text[:MaxJobOutputBytes], true
	}
	return o.Text, o.Truncated
}

// jobRequest maps the policy onto a RunJobRequest.
func (g *Gateway) jobRequest(ctx context.Context, pc manifest.PinnedCommand, dir string, argv []string, env map[string]string, kind string) job.Request {
	p := g.policy
	network := job.NetworkDisabled
	switch {
	case len(p.NetworkHosts) > 0:
		network = job.NetworkAllowlist
	case p.Network:
		network = job.NetworkHost
	}
	timeout := p.Limits.MaxRuntime()
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	req := job.Request{
		Workspace: job.Workspace{Path: dir, SnapshotStrategy: job.SnapshotCopy},
		Command:   job.Command{Argv: argv, Cwd: ".", Env: env},
		Policy: job.Policy{
			AllowedCommands: []job.CommandRule{{Basename: pc.Basename, Path: pc.Path, SHA256: pc.SHA256}},
			Network:         network,
			AllowedHosts:    p.NetworkHosts,
		},
		Limits:  job.Limits{TimeoutMS: max(timeout.Milliseconds(), 1000), MemoryMB: p.Limits.MaxMemoryMB},
		Backend: job.BackendSpec{Kind: kind},
		Trace:   job.Trace(fmt.Sprintf(`{"agent":%q}`, p.Name)),
	}
	for k := range env {
		req.Policy.AllowedEnv = append(req.Policy.AllowedEnv, k)
	}
	return req
}

// localNote is the backend_note of a job on local_process, which runs
// only when the operator configured it (WithBackend).
const localNote = "ran on %s as configured by the operator: no filesystem, network or memory isolation"

// backendKind returns the configured backend when it is registered and
// available now, else a backend.unavailable error with the probe's reason.
// Nothing is cached: the next call probes again (an isolating backend
// caches its own success).
func (g *Gateway) backendKind(ctx context.Context) (string, string, *job.Error) {
	b, ok := backend.Lookup(g.backend)
	if !ok {
		return "", "", job.Errorf(job.CodeBackendUnavail, "backend %s is not built into this binary", g.backend).
			With("backend", g.backend).With("reason", "not registered")
	}
	if err := b.Available(ctx); err != nil {
		return "", "", job.Wrap(job.CodeBackendUnavail, err, "backend is unavailable").
			With("backend", g.backend).With("reason", err.Error())
	}
	if !b.Capabilities().Isolating {
		return g.backend, fmt.Sprintf(localNote, g.backend), nil
	}
	return g.backend, "", nil
}

// existingRoots returns the read and write roots that exist as directories
// (a backend cannot expose a missing directory) and the missing write roots.
func (g *Gateway) existingRoots() (readOnly, writable, missing []string) {
	for _, r := range g.policy.ReadRoots {
		if fi, err := os.Stat(r); err == nil && fi.IsDir() {
			readOnly = append(readOnly, r)
		}
	}
	for _, r := range g.policy.WriteRoots {
		if fi, err := os.Stat(r); err == nil && fi.IsDir() {
			writable = append(writable, r)
		} else {
			missing = append(missing, r)
		}
	}
	return readOnly, writable, missing
}
