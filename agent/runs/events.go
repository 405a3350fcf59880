package runs

import (
	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/job"
)

// A run's progress goes on serve's event bus (kind and type EventKind,
// payload Progress, on ar.events.agent_run.<run_id>), which GET /v1/events
// and the dashboard
// follow: once when it starts, after each tool call (its number, tool,
// and whether the gateway allowed it), and when it ends (its status as
// the API now answers it, and how it ended). The events only feed live
// viewers: the run's directory is the truth, and a publish that fails is
// logged, never the run's failure.

// EventKind is the kind of a capability run's events on the bus, and the
// type of its one event, the run's progress; the envelope's id is the run
// id.
const EventKind = "agent_run"

// Progress is the payload of a capability run's event: its status as the
// API answers it (running, finished, interrupted), the tool calls used so
// far (after a call, its number) and denied so far; Tool and Allowed name
// the call an event follows, and ExitReason says how a finished run ended.
type Progress struct {
	Status     job.Status `json:"status,omitempty"`
	RunID      string     `json:"run_id,omitempty"`
	Calls      int64      `json:"calls,omitempty"`
	Denied     int        `json:"denied,omitempty"`
	Tool       string     `json:"tool,omitempty"`
	Allowed    *bool      `json:"allowed,omitempty"`
	ExitReason string     `json:"exit_reason,omitempty"`
}

// publish sends ev when serve gave the service an event bus.
func (s *Service) publish(ev Progress) {
	if s.cfg.Events == nil {
		return
	}
	if err := s.cfg.Events.Publish(EventKind, ev.RunID, EventKind, ev); err != nil {
		s.cfg.Logger.Warn("cannot publish an agent run event", "run_id", ev.RunID, "error", err)
	}
}

// onStep is run id's launch.Options.OnStep: it counts the call into the
// run's Info (so a read while it runs shows its calls so far) and
// publishes it. The session calls it from the run's goroutine only.
func (s *Service) onStep(id string) func(launch.StepRecord) {
	return func(st launch.StepRecord) {
		s.mu.Lock()
		var in Info
		if a, ok := s.running[id]; ok {
			a.info.ToolCallsUsed = st.Call
			switch {
			case !st.Allowed:
				a.info.Denied++
			case !st.OK:
				a.info.Allowed++
				a.info.Failed++
			default:
				a.info.Allowed++
			}
			in = a.info
		}
		s.mu.Unlock()
		allowed := st.Allowed
		s.publish(Progress{RunID: id, Status: StatusRunning, Calls: st.Call, Denied: in.Denied, Tool: st.Tool, Allowed: &allowed})
	}
}

// ended returns the event that says a run ended: its status as Get
// now answers it, and its counts from the summary.
func (s *Service) ended(id, dir string, sum launch.Summary) Progress {
	return Progress{RunID: id, Status: job.Status(s.status(id, dir)), Calls: sum.ToolCallsUsed, Denied: sum.Denied, ExitReason: sum.ExitReason}
}
