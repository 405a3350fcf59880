package taskapi

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"time"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/agentrun"
	"github.com/agent-runner/agent-runner/task/state"
)

// StreamMessage is one WebSocket message of /ws/tasks/{id}/stream. Type is
// state_change (From, To, Reason), output (Stream, Text: one line of the
// scrubbed log), progress (Progress), metrics (CPU and memory of a
// heartbeat) or error (Error: why the task failed). Every message is
// replayed from the task's records, so a client that connects late or
// reconnects sees the whole history, then live updates.
type StreamMessage struct {
	Type            string             `json:"type"`
	TaskID          string             `json:"task_id"`
	Time            time.Time          `json:"time,omitzero"`
	From            state.State        `json:"from,omitempty"`
	To              state.State        `json:"to,omitempty"`
	Reason          string             `json:"reason,omitempty"`
	Stream          string             `json:"stream,omitempty"`
	Text            string             `json:"text,omitempty"`
	Progress        *agentrun.Progress `json:"progress,omitempty"`
	CPUSeconds      *float64           `json:"cpu_seconds,omitempty"`
	MemoryBytes     *int64             `json:"memory_bytes,omitempty"`
	PeakMemoryBytes *int64             `json:"peak_memory_bytes,omitempty"`
	Processes       *int64             `json:"processes,omitempty"`
	Error           *job.Error         `json:"error,omitempty"`
}

// streamPoll is how often the task's records are read for news.
const streamPoll = 200 * time.Millisecond

// stream serves WS /ws/tasks/{id}/stream: the task's event log, output,
// heartbeats and final error as JSON text messages, closing normally once
// the task is terminal and everything was sent.
func (a *api) stream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.s.Open(id); err != nil {
		writeError(w, err)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context())
	send := func(m StreamMessage) error {
		m.TaskID = id
		b, _ := json.Marshal(m)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return c.Write(wctx, websocket.MessageText, b)
	}
	progress := filepath.Join(a.s.Dir(id), "outbox", "progress")
	offsets := map[string]int64{}
	for {
		st, err := a.record(id)
		terminal := err == nil && st.State.Terminal()
		for _, m := range a.news(progress, offsets) {
			if err := send(m); err != nil {
				return
			}
		}
		if terminal {
			if st.Error != nil {
				if err := send(StreamMessage{Type: "error", Time: st.LastCheckpoint, Error: st.Error}); err != nil {
					return
				}
			}
			c.Close(websocket.StatusNormalClosure, "task "+string(st.State))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(streamPoll):
		}
	}
}

// news reads what was appended to the task's records since the last call:
// state changes first, then output, then heartbeats.
func (a *api) news(progress string, offsets map[string]int64) []StreamMessage {
	var out []StreamMessage
	for _, line := range readNew(filepath.Join(progress, "events.jsonl"), offsets, "events") {
		var ev state.Event
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		typ := ev.Type
		if typ == "" {
			typ = "state_change"
		}
		out = append(out, StreamMessage{Type: typ, Time: ev.Time, From: ev.From, To: ev.To, Reason: ev.Reason})
	}
	for _, stream := range []string{"stdout", "stderr"} {
		for _, line := range readNew(filepath.Join(progress, stream+".log"), offsets, stream) {
			out = append(out, StreamMessage{Type: "output", Stream: stream, Text: line})
		}
	}
	for _, line := range readNew(filepath.Join(progress, agentrun.HeartbeatFile), offsets, "metrics") {
		var hb agentrun.Heartbeat
		if json.Unmarshal([]byte(line), &hb) != nil {
			continue
		}
		p := hb.Progress
		out = append(out, StreamMessage{Type: "progress", Time: hb.Time, Progress: &p})
		if hb.MemoryBytes != nil || hb.CPUSeconds != nil {
			out = append(out, StreamMessage{Type: "metrics", Time: hb.Time, CPUSeconds: hb.CPUSeconds,
				MemoryBytes: hb.MemoryBytes, PeakMemoryBytes: hb.PeakMemoryBytes, Processes: hb.Processes})
		}
	}
	return out
}
