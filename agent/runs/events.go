package runs

import (
	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

// A run's progress goes on serve's event bus (queue.EventAgentRun on
// ar.agentevents.<run_id>), which GET /v1/events and the dashboard
// follow: once when it starts, after each tool call (its number, tool,
// and whether the gateway allowed it), and when it ends (its status as
// the API now answers it, and how it ended). The events only feed live
// viewers: the run's directory is the truth, and a publish that fails is
// logged, never the run's failure.

// publish sends ev when serve gave the service an event bus.
func (s *Service) publish(ev queue.Event) {
	if s.cfg.Events == nil {
		return
	}
	if err := s.cfg.Events.PublishAgentRunEvent(ev); err != nil {
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
		s.publish(queue.Event{RunID: id, Status: StatusRunning, Calls: st.Call, Denied: in.Denied, Tool: st.Tool, Allowed: &allowed})
	}
}

// ended returns the event that says a run ended: its status as Get
// now answers it, and its counts from the summary.
func (s *Service) ended(id, dir string, sum launch.Summary) queue.Event {
	return queue.Event{RunID: id, Status: job.Status(s.status(id, dir)), Calls: sum.ToolCallsUsed, Denied: sum.Denied, ExitReason: sum.ExitReason}
}
