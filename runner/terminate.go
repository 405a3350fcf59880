package runner

import (
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
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
	if err := r.store.Create(req.JobID); err == nil {
		_ = r.store.WriteRequest(req)
		_ = r.store.WriteResult(res)
		_ = r.store.WriteStatus(store.StatusRecord{JobID: req.JobID, Status: res.Status, Attempt: attempt, Backend: res.Backend, Error: jerr})
	}
	return res
}
