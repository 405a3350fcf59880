package session

import (
	"slices"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// A sandbox's state changes go on the bus as kind EventKind, type
// EventState (ar.events.session.<id>), with an Event payload; GET
// /v1/events carries them. The status changes of its runs (its execs and
// background processes) go on the same subject as type EventRun, with a
// RunEvent payload: the sandbox's own stream (FollowEvents) carries both.
// They only feed live viewers: the record is the truth, and a publish
// that fails is logged.
const (
	EventKind  = "session"
	EventState = "session_state"
	EventRun   = "session_run"
)

// Event is the payload of a sandbox's state event: its id, state and
// expiry, and why it failed.
type Event struct {
	SandboxID string     `json:"sandbox_id"`
	State     State      `json:"state"`
	ExpiresAt time.Time  `json:"expires_at"`
	Error     *job.Error `json:"error,omitempty"`
}

// Run kinds of a RunEvent.
const (
	RunExec    = "exec"
	RunProcess = "process"
)

// RunEvent is the payload of a run's status event: which run of which
// sandbox (Run: RunExec or RunProcess, with the process's PID), its
// status (running once it started, then its terminal status) and, once
// ended, its exit code and error. A run that never started (a policy
// denial) has only its terminal event.
type RunEvent struct {
	SandboxID string     `json:"sandbox_id"`
	RunID     string     `json:"run_id"`
	Run       string     `json:"run"`
	PID       int        `json:"pid,omitempty"`
	Status    job.Status `json:"status"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	Error     *job.Error `json:"error,omitempty"`
}

// publish sends rec's state when the service has an event bus.
func (s *Service) publish(rec Record) {
	if s.cfg.Events == nil {
		return
	}
	ev := Event{SandboxID: rec.ID, State: rec.State, ExpiresAt: rec.ExpiresAt, Error: rec.Error}
	if err := s.cfg.Events.Publish(EventKind, rec.ID, EventState, ev); err != nil {
		s.cfg.Logger.Warn("cannot publish a session event", "id", rec.ID, "state", rec.State, "error", err)
	}
}

// publishRun sends a run's status when the service has an event bus.
func (s *Service) publishRun(ev RunEvent) {
	if s.cfg.Events == nil {
		return
	}
	if err := s.cfg.Events.Publish(EventKind, ev.SandboxID, EventRun, ev); err != nil {
		s.cfg.Logger.Warn("cannot publish a session run event", "id", ev.SandboxID, "run_id", ev.RunID, "status", ev.Status, "error", err)
	}
}

// endedRun is the terminal status event of run res.
func endedRun(sandboxID, run string, pid int, res job.Result) RunEvent {
	return RunEvent{SandboxID: sandboxID, RunID: res.JobID, Run: run, PID: pid, Status: res.Status, ExitCode: res.ExitCode, Error: res.Error}
}

// RelayRun publishes ev, a run's status a worker sent of a sandbox
// placed on it (package door/sessionapi/sessionremote), on this node's
// bus: a worker may not publish sandbox events itself. Only a sandbox
// placed on worker is spoken for (another is job.conflict), and only a
// run of that sandbox and kind (<id>.exec-N, <id>.proc-N; another is
// validation.invalid_request).
func (s *Service) RelayRun(worker string, ev RunEvent) error {
	if !store.ValidID(ev.SandboxID) {
		return job.Errorf(job.CodeInvalidRequest, "a run event with an invalid sandbox id").With("worker", worker)
	}
	rec, err := read(s.cfg.Records, ev.SandboxID)
	if err != nil {
		return err
	}
	if rec.Worker != worker {
		return job.Errorf(job.CodeJobConflict, "sandbox %s is not placed on worker %s", rec.ID, worker).With("id", rec.ID).With("worker", worker)
	}
	if !runOf(rec.ID, ev.Run, ev.RunID) || !slices.Contains(job.Statuses, ev.Status) {
		return job.Errorf(job.CodeInvalidRequest, "sandbox %s: %q is not a run of it with a status", rec.ID, ev.RunID).With("id", rec.ID).With("run_id", ev.RunID)
	}
	s.publishRun(ev)
	return nil
}

// runOf reports whether runID is a run of kind run (RunExec or
// RunProcess) of sandbox id: <id>.exec-N or <id>.proc-N.
func runOf(id, run, runID string) bool {
	step := map[string]string{RunExec: "exec-", RunProcess: "proc-"}[run]
	n, ok := strings.CutPrefix(runID, id+"."+step)
	if step == "" || !ok || n == "" || len(n) > 18 {
		return false
	}
	return strings.Trim(n, "0123456789") == ""
}
