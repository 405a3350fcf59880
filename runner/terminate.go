package runner

import (
	"errors"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/telemetry"
)

// Terminate records a terminal result for a prepared job that will not run
// (canceled while queued, interrupted by a restart and not to be retried),
// with the same result shape and hashes as a job that ran.
func (r *Runner) Terminate(req job.Request, jerr *job.Error, attempt int) job.Result {
	now := time.Now().UTC()
	empty := job.Output{Text: "", SHA256: job.SHA256Hex(nil)}
	res := job.Result{
		JobID:     req.JobID,
		Status:    job.StatusFor(jerr.Code),
		Backend:   req.Backend.Kind,
		StartedAt: now,
		EndedAt:   now,
		Command:   job.CommandEcho{Argv: req.Command.Argv, Cwd: req.Command.Cwd},
		Stdout:    empty,
		Stderr:    empty,
		Artifacts: []job.Artifact{},
		Replay:    job.Replay{RequestSHA256: job.RequestSHA256(req)},
		PolicyDecision: job.Decision{
			Action: job.ActionDeny, PolicyVersion: job.PolicyVersion(req.Policy), Messages: []string{},
		},
		Error:   jerr,
		Trace:   req.Trace,
		Attempt: attempt,
	}
	if jerr.Code == job.CodeRunInterrupted {
		res.Status = job.StatusFailed
	}
	res.Replay.ResultSHA256 = job.ResultSHA256(res)
	// The caller has no error to hand on (the job is over either way), so
	// a record that cannot be written is logged here, once.
	if err := r.writeTerminal(req, res, attempt); err != nil {
		r.log.Error("cannot record a job that will not run", telemetry.KeyJobID, req.JobID, "status", res.Status, "error", err)
	}
	return res
}

// writeTerminal writes the record of a job Terminate ends: each file is
// tried, so one that fails does not cost the others.
func (r *Runner) writeTerminal(req job.Request, res job.Result, attempt int) error {
	if err := r.store.Create(req.JobID); err != nil {
		return err
	}
	return errors.Join(
		r.store.WriteRequest(req),
		r.store.WriteResult(res),
		r.store.WriteStatus(store.StatusRecord{JobID: req.JobID, Status: res.Status, Attempt: attempt, Backend: res.Backend, Error: res.Error}),
	)
}
