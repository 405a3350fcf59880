package client

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// Types of a SandboxEvent.
const (
	SandboxEventState = "session_state"
	SandboxEventRun   = "session_run"
)

// SandboxEvent is one event of a sandbox's own stream (GET
// /v1/sandboxes/{id}/events, docs/sessions.md "States"): ID is its
// sequence in the server's events stream, the lastID to resume after.
// A SandboxEventState carries State and ExpiresAt; a SandboxEventRun one
// of its runs' status changes: RunID, Run ("exec" or "process"), PID,
// Status and, once the run ended, ExitCode. Error says why a sandbox or
// run failed.
type SandboxEvent struct {
	ID        uint64       `json:"id"`
	Type      string       `json:"type"`
	Time      time.Time    `json:"time"`
	SandboxID string       `json:"sandbox_id"`
	State     SandboxState `json:"state,omitempty"`
	ExpiresAt time.Time    `json:"expires_at,omitzero"`
	RunID     string       `json:"run_id,omitempty"`
	Run       string       `json:"run,omitempty"`
	PID       int          `json:"pid,omitempty"`
	Status    job.Status   `json:"status,omitempty"`
	ExitCode  *int         `json:"exit_code,omitempty"`
	Error     *job.Error   `json:"error,omitempty"`
}

// FollowSandboxEvents reads the sandbox's own stream over SSE, calling fn
// for each event: after lastID (an event's ID as a decimal string), or,
// with lastID "", from the sandbox's current state. It returns nil once
// the sandbox's final state arrived (the server then ends the stream),
// ctx's error when ctx ends, and fn's when fn fails. An unknown sandbox
// is job.not_found.
func (c *Client) FollowSandboxEvents(ctx context.Context, id, lastID string, fn func(SandboxEvent) error) error {
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if lastID != "" {
		hdr.Set("Last-Event-ID", lastID)
	}
	resp, err := c.do(ctx, http.MethodGet, sandboxPath(id)+"/events", nil, hdr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue // the id and event lines repeat what data holds
		}
		var ev SandboxEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "bad sandbox event")
		}
		if err := fn(ev); err != nil {
			return err
		}
		if ev.Type == SandboxEventState && ev.State != "" && !ev.State.Live() {
			return nil
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return job.Errorf(job.CodeRunIOFailed, "the event stream of sandbox %s ended before the sandbox did", id).With("sandbox_id", id)
}
