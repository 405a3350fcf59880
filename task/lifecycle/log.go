package lifecycle

import (
	"log/slog"

	"github.com/agent-runner/agent-runner/task/state"
)

// LogTaskID is the log attribute key of a task's id.
const LogTaskID = "task_id"

// logger is cfg.Logger, or one that discards (the default).
func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// note appends an event to the task's events.jsonl. The task goes on
// without it; an event that cannot be recorded is logged (its type, not
// its text).
func note(m *state.Machine, log *slog.Logger, typ, reason string) {
	if err := m.Note(typ, reason); err != nil {
		log.Warn("cannot record a task event", "event", typ, "error", err)
	}
}
