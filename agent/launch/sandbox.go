package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/agent-runner/agent-runner/agent/gateway"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/policy"
	"github.com/agent-runner/agent-runner/runner"
)

// EgressFile is a run's audit of its sandbox's egress decisions (a
// manifest with network_hosts): one JSON egress.Decision per line, in
// the run directory.
const EgressFile = "egress.jsonl"

// errEnded is the error of a call made once the run's sandbox was
// closed.
func errEnded() error {
	return job.Errorf(job.CodeRunCanceled, "the run has ended: its sandbox is closed")
}

// toolSandbox runs a session's subprocess tools (a gateway.JobRunner)
// as processes of one sandbox of the run service, the run's: opened on
// the first call (runner.StepID(run_id, "sandbox")) with the read roots
// read-only and the write roots writable at their host paths, the
// manifest's network, its memory and the operator's other defaults, and
// shells denied to every process; each call is one runner.Step in it,
// recorded as <run_id>.call-<n>. Its workspace is a scratch directory
// of the run's own; a call's working directory is reached through a
// link there (a step's cwd lies in its workspace). close deletes the
// sandbox, the scratch directory and the egress bridge.
type toolSandbox struct {
	runID  string
	runDir string
	// r is the run service; with newRunner it is built on the first
	// call and closed by close.
	r         *runner.Runner
	newRunner func() (*runner.Runner, error)
	log       *slog.Logger

	// call keeps a run's calls one at a time.
	call  sync.Mutex
	calls int64

	mu      sync.Mutex
	closed  bool
	sb      *runner.Sandbox
	scratch string
	stop    func()
	egress  *egress.AuditLog
	ownsRun bool
}

// Run implements gateway.JobRunner: req is the gateway's request for
// the call (its argv, env, allowed command and timeout) and opts its
// roots, which the first call's sandbox mounts for the run.
func (t *toolSandbox) Run(ctx context.Context, req job.Request, opts runner.Options) (job.Result, error) {
	t.call.Lock()
	defer t.call.Unlock()
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return job.Result{}, errEnded()
	}
	t.calls++
	n := gateway.CallOf(ctx)
	if n == 0 {
		n = t.calls
	}
	if err := t.ensureRunner(); err != nil {
		return job.Result{}, err
	}
	// Held to the operator's limits as a job is (memory_mb, timeout_ms
	// within the runner's maxima; the backend enabled), before anything
	// is opened; Step holds it to its own.
	checked := req
	if err := t.r.Prepare(&checked); err != nil {
		return job.Result{}, err
	}
	sb, scratch, err := t.sandbox(ctx, req, opts)
	if err != nil {
		return job.Result{}, err
	}
	link, err := cwdLink(scratch, n, req.Workspace.Path)
	if err != nil {
		return job.Result{}, err
	}
	defer os.Remove(filepath.Join(scratch, link))
	req.JobID = runner.StepID(t.runID, "call-"+strconv.FormatInt(n, 10))
	req.Workspace = job.Workspace{}
	req.Command.Cwd = link
	return t.r.Step(ctx, req, runner.Options{Step: &runner.Step{Sandbox: sb}})
}

// cwdLink makes a link to dir in the sandbox's workspace, named for call
// n and a random suffix (the workload may have made any other name), and
// returns its name.
func cwdLink(scratch string, n int64, dir string) (string, error) {
	var b [6]byte
	rand.Read(b[:])
	name := ".cwd-" + strconv.FormatInt(n, 10) + "-" + hex.EncodeToString(b[:])
	if err := os.Symlink(dir, filepath.Join(scratch, name)); err != nil {
		return "", job.Wrap(job.CodeRunIOFailed, err, "cannot link the working directory into the run's sandbox")
	}
	return name, nil
}

// ensureRunner builds the run service of the session's own on the first
// call, when the session was given none.
func (t *toolSandbox) ensureRunner() error {
	if t.r != nil {
		return nil
	}
	r, err := t.newRunner()
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.r, t.ownsRun = r, true
	t.mu.Unlock()
	return nil
}

// sandbox is the run's sandbox, opened on the first call.
func (t *toolSandbox) sandbox(ctx context.Context, req job.Request, opts runner.Options) (*runner.Sandbox, string, error) {
	t.mu.Lock()
	closed, sb, scratch := t.closed, t.sb, t.scratch
	t.mu.Unlock()
	if closed {
		return nil, "", errEnded()
	}
	if sb != nil {
		return sb, scratch, nil
	}
	if err := t.open(ctx, req, opts); err != nil {
		return nil, "", err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sb, t.scratch, nil
}

// open opens the sandbox for the session's calls (see toolSandbox).
func (t *toolSandbox) open(ctx context.Context, req job.Request, opts runner.Options) error {
	b, err := t.r.Backend(req.Backend.Kind)
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp("", "agent-runner-tools-")
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot create the run's sandbox workspace")
	}
	id := runner.StepID(t.runID, "sandbox")
	var audits *egress.AuditLog
	audit := func(egress.Decision) {}
	if req.Policy.Network == job.NetworkAllowlist {
		audits = egress.NewAuditLogMax(filepath.Join(t.runDir, EgressFile), egress.DefaultMaxAuditBytes)
		audit = func(d egress.Decision) {
			if err := audits.Write(d); err != nil {
				t.log.Warn("cannot record an egress decision", "run_id", t.runID, "error", err)
			}
		}
	}
	bridge, stop, err := t.r.SandboxEgress(ctx, id, req.Policy, audit)
	if err != nil {
		os.RemoveAll(scratch)
		t.closeAudit(audits)
		return err
	}
	// The manifest's memory; CPU, processes and /tmp the operator's
	// defaults (OpenSandbox fills them).
	sb, err := t.r.OpenSandbox(ctx, runner.SandboxSpec{
		ID: id, Backend: b, Workspace: scratch, ReadOnly: opts.ReadOnly, Writable: opts.Writable,
		Network: req.Policy.Network, AllowedHosts: req.Policy.AllowedHosts, Egress: bridge,
		Limits: job.Limits{MemoryMB: req.Limits.MemoryMB}, DeniedPrograms: policy.ShellPrograms(),
	})
	if err != nil {
		stop()
		os.RemoveAll(scratch)
		t.closeAudit(audits)
		return err
	}
	t.mu.Lock()
	t.sb, t.scratch, t.stop, t.egress = sb, scratch, stop, audits
	closed := t.closed
	t.mu.Unlock()
	if closed {
		// The run ended while the sandbox was being made.
		t.deleteSandbox()
		return errEnded()
	}
	return nil
}

// close deletes the sandbox (deleteSandbox) and closes a run service of
// the session's own. More calls do nothing; a call in progress ends
// with the sandbox.
func (t *toolSandbox) close() {
	t.deleteSandbox()
	// The run service of the session's own goes once no call uses it.
	t.call.Lock()
	defer t.call.Unlock()
	t.mu.Lock()
	r, owns := t.r, t.ownsRun
	t.ownsRun = false
	t.mu.Unlock()
	if owns {
		r.Close()
	}
}

// deleteSandbox deletes the sandbox (every process left in it is
// killed), then removes its egress bridge and workspace; from now on a
// call fails run.canceled.
func (t *toolSandbox) deleteSandbox() {
	t.mu.Lock()
	t.closed = true
	sb, scratch, stop, audits := t.sb, t.scratch, t.stop, t.egress
	t.sb, t.scratch, t.stop, t.egress = nil, "", nil, nil
	t.mu.Unlock()
	if sb != nil {
		if err := sb.Close(); err != nil {
			t.log.Warn("cannot delete the run's sandbox", "sandbox", sb.ID(), "error", err)
		}
		stop()
		t.closeAudit(audits)
		if err := os.RemoveAll(scratch); err != nil {
			t.log.Warn("cannot remove the run's sandbox workspace", "path", scratch, "error", err)
		}
	}
}

func (t *toolSandbox) closeAudit(a *egress.AuditLog) {
	if a == nil {
		return
	}
	if err := a.Close(); err != nil {
		t.log.Warn("cannot close the run's egress audit", "file", EgressFile, "error", err)
	}
}
