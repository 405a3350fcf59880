package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/validation"
)

// Step is the library-only part of a run that is one step of an agent
// task (the agent, the patch collection, a task shell): what a task door
// decided for the step that no JSON request can say. See Runner.Step.
type Step struct {
	// Backend is the instance the step runs on: the task door's, which
	// chose it (serve's --task-backend). The runner's own Backends are
	// not consulted. With Sandbox it is the sandbox's (and may be nil).
	Backend backend.Backend
	// Sandbox, when set, is the sandbox the step runs in as one process
	// of it (a task's steps share the task's: OpenSandbox), instead of a
	// sandbox of its own: the policy is decided on its backend, the
	// decided argv, env and cwd are started in it with the request's
	// timeout and the runner's kill grace, and the run is captured and
	// recorded as any step's, its result naming the sandbox. What holds
	// for the whole sandbox (its view and binds, network and egress,
	// memory, CPU, processes and /tmp) was set by OpenSandbox: Step
	// writes it into the request it records, and Options.ReadOnly,
	// Writable and Step.Egress are not used. A request whose policy
	// needs an exec confinement the sandbox lacks (exec_scope
	// every_process; allow_shell false in a sandbox that does not deny
	// the shells, SandboxSpec.DeniedPrograms) ends backend_unavailable:
	// only a sandbox of its own holds one.
	Sandbox *Sandbox
	// Env is added to the environment the policy decided, after it: the
	// values no record may hold (secrets, the task token). It is never
	// written to request.json, and Wrap is where the caller keeps its
	// values out of the captured output.
	Env []string
	// Egress is the caller's bridge for a request whose policy.network
	// is "allowlist": the task door opened it with the task's allowlist
	// and secret bindings, within the operator's ceiling, and audits it
	// in the task's records. The runner opens no gateway run of its own
	// for a step, and leaves network "host" to the caller's operator
	// setting (--task-allow-host-network).
	Egress *backend.Egress
	// Wrap, when set, is handed the run's capture of each stream
	// ("stdout", "stderr") and returns the writer the backend writes
	// that stream to: the caller's own processing (progress parsing,
	// secret scrubbing) in front of the capture. If the returned writer
	// has a Flush method, it is called once the process has ended,
	// before the record is written.
	Wrap func(stream string, capture io.Writer) io.Writer
	// Stdin, when set, is the process's standard input.
	Stdin io.Reader
	// Terminal, when set, is a pseudo-terminal's slave: the process gets
	// it as stdin, stdout and stderr with a controlling terminal, and its
	// output goes there only (the record's output is empty).
	Terminal *os.File
	// Pty, with Sandbox, runs the process on a pseudo-terminal the
	// backend opens with this size (backend.Exec.Terminal): Stdin is
	// typed into it and what it shows is the stdout the run captures
	// (and Wrap gets); stderr is empty. Terminal, when also set, wins.
	Pty *backend.Terminal
	// Started, with Sandbox, is called once the process runs, with the
	// run's id (the one recorded) and the backend's process, before Step
	// waits for it: a caller that runs Step in the background signals,
	// resizes and closes the input of the process through it. It is not
	// called for a run that never started (a policy denial, a spawn
	// failure).
	Started func(runID string, p backend.Process)
	// Usage and UsageEvery sample the running process (backend.Spec); in
	// a Sandbox, the whole sandbox's usage while the step runs, where
	// its backend can read it (backend.UsageSampler).
	Usage      func(backend.Usage)
	UsageEvery time.Duration
}

// maxStepAttempts bounds the ids Step tries for one step (StepID, then
// "-2", "-3"...): a task run again after a restart, or a job that took
// the id first, moves the step to the next one.
const maxStepAttempts = 64

// StepID is the run id of a task's step: "<task_id>.<step>", the task
// id shortened and marked with its hash when the whole would exceed the
// run store's 128 bytes. taskID and step must be valid ids themselves.
func StepID(taskID, step string) string {
	const room = 128 - len("-99") // Step's attempt suffixes
	id := taskID + "." + step
	if len(id) <= room {
		return id
	}
	sum := sha256.Sum256([]byte(taskID))
	tag := "-" + hex.EncodeToString(sum[:8])
	return taskID[:room-len(tag)-len(step)-1] + tag + "." + step
}

// Step runs one step of an agent task as a run of the run service: the
// request is validated (against the runner's defaults; the task door
// held the task's limits to its own admission, so the runner's maxima
// do not apply), recorded under runs/<id> with a fresh id (req.JobID,
// else the first of req.JobID-2 ... not yet taken), decided by
// policy.Decide, run on opts.Step.Backend in req.Workspace.Path itself
// (the task's live directory: no snapshot is taken, and the record has
// no snapshot hash, so a step is not replayable), captured and recorded
// with its policy decision and result. The result's job id is the one
// recorded. The error is non-nil only for a request that is not valid
// or an id that cannot be claimed; a policy denial is a result. With
// opts.Step.Sandbox the step is a process of that sandbox (see Step).
func (r *Runner) Step(ctx context.Context, req job.Request, opts Options) (job.Result, error) {
	st := opts.Step
	if st != nil && st.Sandbox != nil {
		if len(req.Workspace.ReadOnlyMounts) > 0 || len(req.Workspace.Caches) > 0 {
			return job.Result{}, job.Errorf(job.CodeInvalidRequest, "workspace.readonly_mounts and workspace.caches: a step in a shared sandbox has the sandbox's view").With("field", "workspace")
		}
		step := *st
		step.Backend = st.Sandbox.b
		opts.Step, st = &step, &step
		st.Sandbox.shape(&req)
	}
	if st == nil || st.Backend == nil {
		return job.Result{}, job.Errorf(job.CodeInvalidRequest, "a task step needs its backend")
	}
	if req.Limits.DiskMB != 0 || req.Limits.DiskInodes != 0 {
		// A size-limited workspace is a copy on the backend's filesystem:
		// the step would not run in the task's directory. A task's quota
		// is its own (vm.disk).
		return job.Result{}, job.Errorf(job.CodeInvalidRequest, "limits.disk_mb: a task step runs in the task's workspace, whose quota is vm.disk").With("field", "limits.disk_mb")
	}
	kind := st.Backend.Kind()
	req.Backend.Kind = kind
	defaults := r.cfg.Defaults
	defaults.DiskMB, defaults.DiskInodes = 0, 0
	err := validation.Request(&req, validation.Config{
		// The limits the task door set are the maxima (a zero field
		// stays held to validation.DefaultMax).
		Defaults: defaults, Max: req.Limits, DefaultBackend: kind, KnownBackend: func(k string) bool { return k == kind },
	})
	if err != nil {
		return job.Result{}, err
	}
	if req.JobID == "" {
		return job.Result{}, job.Errorf(job.CodeInvalidRequest, "a task step needs its job_id (StepID)").With("field", "job_id")
	}
	base := req.JobID
	for i := 1; ; i++ {
		if i > 1 {
			req.JobID = base + "-" + strconv.Itoa(i)
		}
		created, err := r.store.Claim(req, store.StatusRecord{JobID: req.JobID, Status: job.StatusQueued, Backend: kind})
		if created {
			break
		}
		if err != nil && job.CodeOf(err) != job.CodeJobConflict {
			return job.Result{}, err
		}
		if i == maxStepAttempts {
			return job.Result{}, job.Errorf(job.CodeJobConflict, "every run id of this step is taken").With("job_id", base)
		}
	}
	return r.execute(ctx, req, opts, false), nil
}

// backendFor is the instance that runs the execution: its step's, else
// the runner's for the request's kind.
func (e *execution) backendFor() (backend.Backend, error) {
	if st := e.opts.Step; st != nil {
		return st.Backend, nil
	}
	return e.r.Backend(e.req.Backend.Kind)
}

// workspace is the job's writable root: a step's live directory as it
// is, else a snapshot of the request's workspace.
func (e *execution) workspace(ctx context.Context) (backend.Workspace, error) {
	if e.opts.Step != nil {
		e.layers = []string{e.req.Workspace.Path}
		return backend.Workspace{Dir: e.req.Workspace.Path}, nil
	}
	return e.snapshot(ctx)
}

// applyStep puts a step's extras into spec and returns the function to
// call once the process has ended (flushing the caller's writers).
func (e *execution) applyStep(spec *backend.Spec) func() {
	st := e.opts.Step
	if st == nil {
		return func() {}
	}
	spec.Env = append(spec.Env, st.Env...)
	spec.Usage, spec.UsageEvery = st.Usage, st.UsageEvery
	if st.Terminal != nil {
		spec.Stdin, spec.Stdout, spec.Stderr, spec.TTY = st.Terminal, st.Terminal, st.Terminal, true
		return func() {}
	}
	spec.Stdin = st.Stdin
	if st.Wrap == nil {
		return func() {}
	}
	spec.Stdout, spec.Stderr = st.Wrap("stdout", e.stdout), st.Wrap("stderr", e.stderr)
	return func() { flushAll(spec.Stdout, spec.Stderr) }
}
