package taskapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"time"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/state"
)

// StreamMessage is one WebSocket message of /ws/tasks/{id}/stream. Type is
// state_change (From, To, Reason), output (Stream, Text: one line of the
// scrubbed log), progress (Progress), metrics (CPU and memory of a
// heartbeat) or error (Error: why the task failed). Every message is
// replayed from the task's records, so a client that connects late or
// reconnects sees the whole history, then live updates. The terminal
// state change comes after the last output.
//
// With ?output=chunks an output message carries up to 64 KiB of the log
// instead of one line: Text is Lines lines joined by "\n" (no trailing
// newline). A line longer than a chunk comes in pieces, one per message,
// in either form.
type StreamMessage struct {
	Type            string              `json:"type"`
	TaskID          string              `json:"task_id"`
	Time            time.Time           `json:"time,omitzero"`
	From            state.State         `json:"from,omitempty"`
	To              state.State         `json:"to,omitempty"`
	Reason          string              `json:"reason,omitempty"`
	Stream          string              `json:"stream,omitempty"`
	Text            string              `json:"text,omitempty"`
	Lines           int                 `json:"lines,omitempty"`
	Progress        *agentstep.Progress `json:"progress,omitempty"`
	CPUSeconds      *float64            `json:"cpu_seconds,omitempty"`
	MemoryBytes     *int64              `json:"memory_bytes,omitempty"`
	PeakMemoryBytes *int64              `json:"peak_memory_bytes,omitempty"`
	Processes       *int64              `json:"processes,omitempty"`
	Error           *job.Error          `json:"error,omitempty"`
}

// streamPoll is how often a live task's records are read for news.
const streamPoll = 100 * time.Millisecond

// stream serves WS /ws/tasks/{id}/stream: the task's event log, output,
// heartbeats and final error as JSON text messages, closing normally once
// the task is terminal and everything was sent. Each message is read
// from the records as the connection takes the one before (see tail), so
// a viewer costs serve a chunk of memory, not its backlog.
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
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	send := func(m StreamMessage) error {
		m.TaskID = id
		buf.Reset()
		enc.Encode(m)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return c.Write(wctx, websocket.MessageText, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
	}
	chunks := r.URL.Query().Get("output") == "chunks"
	sendOutput := func(stream string, chunk []byte) error {
		if chunks {
			lines := bytes.Count(chunk, []byte{'\n'})
			text := bytes.TrimSuffix(chunk, []byte{'\n'})
			if len(text) == len(chunk) {
				lines++ // a piece of a long line, or the unterminated last one
			}
			return send(StreamMessage{Type: "output", Stream: stream, Text: string(text), Lines: lines})
		}
		return eachLine(chunk, func(line []byte) error {
			return send(StreamMessage{Type: "output", Stream: stream, Text: string(line)})
		})
	}
	rt := newRecordTails(filepath.Join(a.s.Dir(id), "outbox", "progress"))
	defer rt.close()
	// Terminal state changes wait for the output before them.
	var held []StreamMessage
	for {
		st, err := a.record(id)
		terminal := err == nil && st.State.Terminal()
		err = rt.events(terminal, func(m StreamMessage) error {
			if m.To.Terminal() {
				held = append(held, m)
				return nil
			}
			return send(m)
		})
		if err == nil {
			err = rt.output(terminal, sendOutput)
		}
		if err == nil {
			err = rt.heartbeats(terminal, send)
		}
		if err != nil {
			return
		}
		if terminal {
			for _, m := range held {
				if send(m) != nil {
					return
				}
			}
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

// recordTails are one viewer's readers of a task's records
// (outbox/progress): events.jsonl, stdout.log, stderr.log and the
// heartbeats.
type recordTails struct {
	ev, hb *tail
	logs   [2]*tail // stdout, stderr
}

var logStreams = [2]string{"stdout", "stderr"}

func newRecordTails(progress string) *recordTails {
	return &recordTails{
		ev:   newTail(filepath.Join(progress, "events.jsonl")),
		hb:   newTail(filepath.Join(progress, agentstep.HeartbeatFile)),
		logs: [2]*tail{newTail(filepath.Join(progress, "stdout.log")), newTail(filepath.Join(progress, "stderr.log"))},
	}
}

func (rt *recordTails) close() {
	rt.ev.close()
	rt.hb.close()
	rt.logs[0].close()
	rt.logs[1].close()
}

// events calls fn with each new event of events.jsonl.
func (rt *recordTails) events(final bool, fn func(StreamMessage) error) error {
	for chunk := rt.ev.next(final); chunk != nil; chunk = rt.ev.next(final) {
		err := eachLine(chunk, func(line []byte) error {
			var ev state.Event
			if json.Unmarshal(line, &ev) != nil {
				return nil
			}
			typ := ev.Type
			if typ == "" {
				typ = "state_change"
			}
			return fn(StreamMessage{Type: typ, Time: ev.Time, From: ev.From, To: ev.To, Reason: ev.Reason})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// output calls fn with each new chunk of the logs, a chunk of stdout and
// one of stderr in turn, until both are read to their end (with final,
// an unterminated last line included).
func (rt *recordTails) output(final bool, fn func(stream string, chunk []byte) error) error {
	for {
		more := false
		for i, t := range rt.logs {
			if chunk := t.next(final); chunk != nil {
				more = true
				if err := fn(logStreams[i], chunk); err != nil {
					return err
				}
			}
		}
		if !more {
			return nil
		}
	}
}

// heartbeats calls fn with a progress message, and a metrics one when it
// has CPU or memory, for each new heartbeat.
func (rt *recordTails) heartbeats(final bool, fn func(StreamMessage) error) error {
	for chunk := rt.hb.next(final); chunk != nil; chunk = rt.hb.next(final) {
		err := eachLine(chunk, func(line []byte) error {
			var hb agentstep.Heartbeat
			if json.Unmarshal(line, &hb) != nil {
				return nil
			}
			p := hb.Progress
			if err := fn(StreamMessage{Type: "progress", Time: hb.Time, Progress: &p}); err != nil {
				return err
			}
			if hb.MemoryBytes != nil || hb.CPUSeconds != nil {
				return fn(StreamMessage{Type: "metrics", Time: hb.Time, CPUSeconds: hb.CPUSeconds,
					MemoryBytes: hb.MemoryBytes, PeakMemoryBytes: hb.PeakMemoryBytes, Processes: hb.Processes})
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
