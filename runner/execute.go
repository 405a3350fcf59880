package runner

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agent-runner/agent-runner/artifact"
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/capture"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/policy"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/telemetry"
)

// execution is the state of one job moving through the pipeline.
type execution struct {
	r      *Runner
	req    job.Request
	opts   Options
	res    job.Result
	start  time.Time
	stdout *capture.Stream
	stderr *capture.Stream
	// layers are the workspace directories artifacts are read from, top
	// first (one for copy, upper then lower for overlay).
	layers []string
	// img is the resolved backend.image of a run in a sandbox of its
	// own (a run in a shared sandbox has the sandbox's).
	img *backend.Image
}

// image is the image the execution's root is made of, or nil.
func (e *execution) image() *backend.Image {
	if s := e.sandbox(); s != nil {
		return s.img
	}
	return e.img
}

// Execute runs a prepared request (see Prepare) through the pipeline and
// records it. It always returns a Result; record-write failures are
// reported in the result's error. An id whose record has result.json is not
// run again: its stored result is returned and the record left as it is.
func (r *Runner) Execute(ctx context.Context, req job.Request, opts Options) job.Result {
	return r.execute(ctx, req, opts, false)
}

// execute is Execute; with wait, an id running in this runner is waited
// for (until ctx ends) instead of being job.conflict, and then answered
// from its record.
func (r *Runner) execute(ctx context.Context, req job.Request, opts Options, wait bool) job.Result {
	e := &execution{r: r, req: req, opts: opts, start: time.Now().UTC()}
	e.stdout = capture.New(req.Limits.MaxStdoutBytes, e.live("stdout"))
	e.stderr = capture.New(req.Limits.MaxStderrBytes, e.live("stderr"))
	e.res = job.Result{
		JobID:     req.JobID,
		Status:    job.StatusRunning,
		Backend:   req.Backend.Kind,
		StartedAt: e.start,
		Command:   job.CommandEcho{Argv: req.Command.Argv, Cwd: req.Command.Cwd},
		Artifacts: []job.Artifact{},
		Replay:    job.Replay{RequestSHA256: job.RequestSHA256(req)},
		PolicyDecision: job.Decision{
			Action: job.ActionDeny, PolicyVersion: job.PolicyVersion(req.Policy), Messages: []string{},
		},
		Trace:   req.Trace,
		Attempt: opts.Attempt,
	}
	done := make(chan struct{})
	for {
		prev, busy := r.active.LoadOrStore(req.JobID, done)
		if !busy {
			break
		}
		if wait {
			select {
			case <-prev.(chan struct{}):
				continue
			case <-ctx.Done():
			}
		}
		// Nothing is written: the record belongs to the running attempt.
		e.res.Status = job.StatusFailed
		e.res.Error = job.Errorf(job.CodeJobConflict, "job_id is already running in this runner").With("job_id", req.JobID)
		e.res.EndedAt = time.Now().UTC()
		e.res.Stdout, e.res.Stderr = e.stdout.Output(), e.stderr.Output()
		return e.res
	}
	defer func() { r.active.Delete(req.JobID); close(done) }()
	// Another process sharing the store may execute the same id: the run
	// lock makes one attempt at a time, and a waiting Run answers from
	// the record the other one wrote.
	unlock, err := r.store.LockRun(ctx, req.JobID, wait)
	if err != nil {
		e.res.Status = job.StatusFailed
		e.res.Error = job.Errorf(job.CodeJobConflict, "job_id is already running in another process").With("job_id", req.JobID)
		if !errors.Is(err, store.ErrRunLocked) && ctx.Err() == nil {
			e.res.Error = job.AsError(err)
		}
		e.res.EndedAt = time.Now().UTC()
		return e.res
	}
	defer unlock()
	// A finished record is never rewritten: a redelivered or repeated id
	// gets the stored result.
	if res, err := r.store.ReadResult(req.JobID); err == nil {
		return res
	} else if job.CodeOf(err) != job.CodeJobNotFound {
		e.res.Status = job.StatusFailed
		e.res.Error = job.AsError(err)
		e.res.EndedAt = time.Now().UTC()
		return e.res
	}
	if err := e.begin(); err != nil {
		return e.finish(err)
	}
	return e.finish(e.run(ctx))
}

// log is the runner's logger with the job's id.
func (e *execution) log() *slog.Logger { return e.r.log.With(telemetry.KeyJobID, e.req.JobID) }

func (e *execution) live(stream string) func([]byte) {
	if e.opts.Output == nil {
		return nil
	}
	return func(p []byte) { e.opts.Output(e.req.JobID, stream, p) }
}

func (e *execution) stage(name string, since time.Time) {
	if e.opts.Stage != nil {
		e.opts.Stage(e.req.JobID, name, time.Since(since))
	}
}

// begin creates the record and marks the job running.
func (e *execution) begin() error {
	st := e.r.store
	if st.Exists(e.req.JobID) {
		// A previous attempt (a crash, a redelivery) left a record without
		// result.json: start from a clean directory.
		if err := e.clearUnfinished(); err != nil {
			return err
		}
	}
	if err := st.Create(e.req.JobID); err != nil {
		return err
	}
	// The HTTP door already wrote request.json when it accepted the job.
	if _, err := os.Stat(filepath.Join(st.RunDir(e.req.JobID), store.RequestFile)); err != nil {
		if err := st.WriteRequest(e.req); err != nil {
			return err
		}
	}
	if err := st.WriteStatus(store.StatusRecord{JobID: e.req.JobID, Status: job.StatusRunning, Attempt: e.opts.Attempt, Backend: e.req.Backend.Kind}); err != nil {
		return err
	}
	if e.opts.Status != nil {
		e.opts.Status(e.req.JobID, job.StatusRunning)
	}
	return nil
}

// unfinishedLeftovers are what an attempt writes after request.json and
// status.json, result.json aside (a record with one is finished and
// Execute never reaches begin).
var unfinishedLeftovers = []string{store.SnapshotDir, store.ArtifactsDir, "overlay", SnapshotManifestFile, store.StdoutFile, store.StderrFile, EgressFile}

// clearUnfinished removes them (one directory read when there are none,
// as for a job the HTTP door accepted).
func (e *execution) clearUnfinished() error {
	dir := e.r.store.RunDir(e.req.JobID)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot read the run directory")
	}
	for _, ent := range entries {
		if !slices.Contains(unfinishedLeftovers, ent.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, ent.Name())); err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "cannot clear an unfinished attempt").With("path", ent.Name())
		}
	}
	return nil
}

// run decides policy, snapshots, runs the backend and collects artifacts.
// A returned error is the job's terminal error.
func (e *execution) run(ctx context.Context) error {
	t := time.Now()
	if ref := e.req.Backend.Image; ref != "" && e.sandbox() == nil {
		img, release, err := e.r.resolveImage(ref)
		if err != nil {
			return err
		}
		defer release()
		e.img = img
	}
	dec, derr := policy.Decide(e.req, e.policyConfig())
	e.res.PolicyDecision.Messages = dec.Messages
	if derr != nil {
		e.res.PolicyDecision.Messages = append(e.res.PolicyDecision.Messages, derr.Message)
		return derr
	}
	b, err := e.backendFor()
	if err != nil {
		return err
	}
	caps := e.capabilities(b)
	if len(caps.NetworkModes) > 0 && !slices.Contains(caps.NetworkModes, e.req.Policy.Network) {
		err := job.Errorf(job.CodeNetworkDenied, "network mode is not available on this backend").
			With("network", e.req.Policy.Network).With("backend", b.Kind()).With("allowed", caps.NetworkModes)
		e.res.PolicyDecision.Messages = append(e.res.PolicyDecision.Messages, err.Message)
		return err
	}
	rules, nerr := e.networkRules()
	if nerr != nil {
		e.res.PolicyDecision.Messages = append(e.res.PolicyDecision.Messages, nerr.Message)
		return nerr
	}
	e.res.PolicyDecision.Action = job.ActionAllow
	e.stage("policy", t)

	if err := b.Available(ctx); err != nil {
		return job.Wrap(job.CodeBackendUnavail, err, "backend is unavailable").With("backend", b.Kind()).With("reason", err.Error())
	}
	if dec.Executables != nil && !slices.Contains(caps.Enforces, job.LimitLandlock) {
		return job.Errorf(job.CodeBackendUnavail, "policy.exec_scope every_process needs a backend that confines every exec (linux_sandbox with Landlock)").
			With("backend", b.Kind()).With("reason", "the backend does not enforce landlock")
	}
	if e.r.cfg.RequireEnforcement {
		if missing := missingEnforcement(caps.Enforces); len(missing) > 0 {
			return job.Errorf(job.CodeBackendUnavail, "backend cannot enforce every limit and the runner requires enforcement").
				With("backend", b.Kind()).With("not_enforced", missing)
		}
	}

	t = time.Now()
	ws, err := e.workspace(ctx)
	if err != nil {
		return err
	}
	e.stage("snapshot", t)

	if s := e.sandbox(); s != nil {
		t = time.Now()
		out, err := e.execIn(ctx, s, dec)
		e.stage("backend", t)
		if err != nil {
			return err
		}
		e.outcome(out, backend.Spec{DeniedPrograms: s.spec.DeniedPrograms})
		return e.collect(ctx, out)
	}

	binds, release, err := e.binds(ctx)
	defer release()
	if err != nil {
		return err
	}

	t = time.Now()
	l := e.req.Limits
	spec := backend.Spec{
		JobID:     e.req.JobID,
		Argv:      dec.Argv,
		Env:       dec.Env,
		Workspace: ws,
		Cwd:       e.req.Command.Cwd,
		ReadOnly:  e.opts.ReadOnly,
		Writable:  e.opts.Writable,
		Binds:     binds,
		Network:   e.req.Policy.Network,
		Runtime:   e.req.Backend.Runtime,
		Limits: backend.Limits{
			Timeout:      time.Duration(l.TimeoutMS) * time.Millisecond,
			KillGrace:    e.r.cfg.KillGrace,
			MemoryBytes:  l.MemoryMB << 20,
			CPUCount:     float64(l.CPUCount),
			MaxProcesses: l.MaxProcesses,
			TmpBytes:     l.TmpMB << 20,
			DiskBytes:    l.DiskMB << 20,
			DiskInodes:   l.DiskInodes,
		},
		Stdout: e.stdout,
		Stderr: e.stderr,
	}
	spec.Executables, spec.Pinned, spec.DeniedPrograms = dec.Executables, dec.Pinned, dec.DeniedPrograms
	spec.Image = e.img
	if e.req.Policy.Network == job.NetworkAllowlist {
		bridge, stop, err := e.egressBridge(ctx, rules)
		if err != nil {
			return err
		}
		spec.Egress = bridge
		defer stop()
	}
	ended := e.applyStep(&spec)
	out, err := b.Run(ctx, spec)
	ended()
	e.stage("backend", t)
	if err != nil {
		return err
	}
	if out.Release != nil {
		// A size-limited workspace (limits.disk_mb) lives on the
		// backend's filesystem until its artifacts are collected.
		defer out.Release()
	}
	if len(out.Layers) > 0 {
		e.layers = out.Layers
	}
	e.outcome(out, spec)
	return e.collect(ctx, out)
}

// collect gathers the artifacts of a process that ended with out and
// returns the job's terminal error.
func (e *execution) collect(ctx context.Context, out backend.Outcome) error {
	t := time.Now()
	aerr := e.artifacts(ctx)
	e.stage("artifacts", t)
	if aerr != nil {
		return aerr
	}
	return e.exitError(out)
}

// outcome copies the backend's report on spec into the result.
func (e *execution) outcome(out backend.Outcome, spec backend.Spec) {
	e.res.ExitCode = out.ExitCode
	e.res.Termination = &job.Termination{Reason: out.Reason, Signal: out.Signal}
	if out.CPUTime > 0 || out.PeakMemoryBytes > 0 {
		e.res.Usage = &job.Usage{CPUTimeMS: out.CPUTime.Milliseconds(), PeakMemoryBytes: out.PeakMemoryBytes}
	}
	e.res.Enforcement = &job.Enforcement{Enforced: nonNil(out.Enforced), NotEnforced: nonNil(out.NotEnforced)}
	if spec.DeniedPrograms != nil && !slices.Contains(out.Enforced, job.LimitShells) && !slices.Contains(out.NotEnforced, job.LimitShells) {
		// A backend that knows nothing of denied programs checked the
		// command line only (policy.Decide).
		e.res.Enforcement.NotEnforced = append(e.res.Enforcement.NotEnforced, job.LimitShells)
	}
	e.res.ExecDenials, e.res.ExecDenialsTotal = out.ExecDenials, out.ExecDenialsTotal
}

// exitError maps how the process ended to the job's terminal error.
func (e *execution) exitError(out backend.Outcome) error {
	switch out.Reason {
	case job.ReasonTimeout:
		return job.Errorf(job.CodeRunTimedOut, "command exceeded timeout_ms").With("timeout_ms", e.req.Limits.TimeoutMS)
	case job.ReasonCanceled:
		return job.Errorf(job.CodeRunCanceled, "job was canceled")
	case job.ReasonOOM:
		return job.Errorf(job.CodeRunOOM, "command was killed for exceeding memory_mb").With("memory_mb", e.req.Limits.MemoryMB)
	case job.ReasonSignal:
		return job.Errorf(job.CodeRunSignaled, "command was killed by a signal").With("signal", out.Signal)
	}
	if out.ExitCode != nil && *out.ExitCode != 0 {
		return job.Errorf(job.CodeRunExitNonzero, "command exited with a non-zero status").With("exit_code", *out.ExitCode)
	}
	return nil
}

// artifacts collects opted-in files within the run-record budget. Files
// past a cap are listed in artifacts_skipped and never change the
// verdict; only a failure to collect does.
func (e *execution) artifacts(ctx context.Context) error {
	if len(e.req.Policy.ArtifactGlobs) == 0 {
		return nil
	}
	l := e.req.Limits
	budget := l.MaxRunRecordBytes - e.fixedRecordBytes() - 2*(e.stdout.Len()+e.stderr.Len())
	maxBytes := l.MaxArtifactBytes
	if budget < maxBytes {
		maxBytes = max(budget, 1)
	}
	dest := filepath.Join(e.r.store.RunDir(e.req.JobID), store.ArtifactsDir)
	res, err := artifact.Collect(ctx, e.layers, e.req.Policy.ArtifactGlobs, e.req.Policy.ArtifactDenyGlobs,
		artifact.Limits{MaxCount: l.MaxArtifactCount, MaxFileBytes: l.MaxArtifactFileBytes, MaxBytes: maxBytes}, dest)
	e.res.Artifacts = res.Artifacts
	for _, s := range res.Skipped {
		if s.Reason == job.SkipMaxArtifactBytes && maxBytes < l.MaxArtifactBytes {
			s.Reason = job.SkipMaxRunRecordBytes
		}
		e.res.ArtifactsSkipped = append(e.res.ArtifactsSkipped, s)
	}
	for _, d := range res.Denied {
		e.res.PolicyDecision.Messages = append(e.res.PolicyDecision.Messages, "artifact denied: "+d)
	}
	return err
}

// fixedRecordBytes estimates request.json, status.json and result.json
// without their output text.
func (e *execution) fixedRecordBytes() int64 {
	req, _ := json.Marshal(e.req) // a Request always encodes; this is an estimate
	return int64(2*len(req)) + 8<<10
}

// finish turns the terminal error into the final status, writes stdout.txt,
// stderr.txt, result.json and status.json, and reports the status.
func (e *execution) finish(err error) job.Result {
	res := &e.res
	res.Status = job.StatusCompleted
	if err != nil {
		jerr := job.AsError(err)
		res.Error = jerr
		res.Status = job.StatusFor(jerr.Code)
		if jerr.Code == job.CodeRunExitNonzero || jerr.Code == job.CodeRunOOM || jerr.Code == job.CodeRunSignaled {
			res.Status = job.StatusFailed
		}
	}
	res.EndedAt = time.Now().UTC()
	res.DurationMS = res.EndedAt.Sub(e.start).Milliseconds()
	if res.Status != job.StatusCompleted && e.opts.Interrupted != nil && e.opts.Interrupted() {
		// Not over: the job runs again; no reader ever sees this ending.
		return *res
	}
	t := time.Now()
	if werr := e.record(); werr != nil {
		res.Status = job.StatusFailed
		res.Error = job.AsError(werr)
		res.Replay.ResultSHA256 = job.ResultSHA256(*res)
	}
	// result.json is the record readers trust, but a stale status.json
	// still misleads listings and keeps retention from removing the run:
	// the operator is told. (Without a record, res.Error says why.)
	if e.r.store.Exists(res.JobID) {
		if werr := e.r.store.WriteStatus(store.StatusRecord{JobID: res.JobID, Status: res.Status, Attempt: e.opts.Attempt, Backend: res.Backend, Error: res.Error}); werr != nil {
			e.log().Error("cannot record the job's final status", "status", res.Status, "error", werr)
		}
	}
	e.stage("record", t)
	if e.opts.Status != nil {
		e.opts.Status(res.JobID, res.Status)
	}
	return *res
}

// record writes the output files and result.json within max_run_record_bytes:
// if the retained output does not fit, it is cut further (and marked
// truncated) before anything is written.
func (e *execution) record() error {
	res := &e.res
	keep := int64(-1)
	if limit := e.req.Limits.MaxRunRecordBytes; limit > 0 {
		room := (limit - e.fixedRecordBytes() - artifactBytes(res.Artifacts)) / 4
		if e.stdout.Len() > room || e.stderr.Len() > room {
			keep = max(room, 0)
		}
	}
	res.Stdout, res.Stderr = e.stdout.OutputN(keep), e.stderr.OutputN(keep)
	res.Replay.ResultSHA256 = job.ResultSHA256(*res)
	if res.JobID == "" || !e.r.store.Exists(res.JobID) {
		return nil // validation never created a record
	}
	dir := e.r.store.RunDir(res.JobID)
	if err := store.WriteFileOnce(filepath.Join(dir, store.StdoutFile), e.stdout.Retained(keep), store.RecordFileMode); err != nil {
		return err
	}
	if err := store.WriteFileOnce(filepath.Join(dir, store.StderrFile), e.stderr.Retained(keep), store.RecordFileMode); err != nil {
		return err
	}
	return e.r.store.WriteResult(*res)
}

func artifactBytes(as []job.Artifact) int64 {
	var n int64
	for _, a := range as {
		n += a.SizeBytes
	}
	return n
}

// requiredLimits are the limits RequireEnforcement insists on.
var requiredLimits = []string{job.LimitTimeout, job.LimitOutput, job.LimitNetwork, job.LimitMemory, job.LimitProcesses, job.LimitFSWrite}

func missingEnforcement(enforced []string) []string {
	var missing []string
	for _, l := range requiredLimits {
		if !slices.Contains(enforced, l) {
			missing = append(missing, l)
		}
	}
	return missing
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
