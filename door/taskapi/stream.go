package taskapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"time"

	"github.com/agent-runner/agent-runner/door/eventstream"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/state"
)

// StreamMessage is one message of /ws/tasks/{id}/stream. Type is
// state_change (From, To, Reason), output (Stream, Text: one line of the
// scrubbed log), progress (Progress), metrics (CPU and memory of a
// heartbeat) or error (Error: why the task failed). Every message is
// replayed from the task's records, so a client that connects late sees
// the whole history, then live updates; one that reconnects with the ID
// of the last message it got (Last-Event-ID, or ?last_event_id= on a
// WebSocket) resumes right after it. The terminal state change comes
// after the last output.
//
// With ?output=chunks an output message carries up to 64 KiB of the log
// instead of one line: Text is Lines lines joined by "\n" (no trailing
// newline). A line longer than a chunk comes in pieces, one per message,
// in either form.
type StreamMessage struct {
	// ID is where the viewer stands after this message (see position).
	ID              string              `json:"id,omitempty"`
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

// resumeParam is the query parameter a WebSocket client resumes with.
const resumeParam = "last_event_id"

// stream serves /ws/tasks/{id}/stream: the task's event log, output,
// heartbeats and final error as JSON messages (over a WebSocket, or as
// Server-Sent Events to a client that does not upgrade, such as the
// dashboard's fetch), ending normally once the task is terminal and
// everything was sent. Each message is read from the records as the
// connection takes the one before, so a viewer costs serve a chunk of
// memory, not its backlog.
func (a *api) stream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.s.Open(id); err != nil {
		writeError(w, err)
		return
	}
	from, err := parsePosition(eventstream.ResumeFrom(r, resumeParam))
	if err != nil {
		writeError(w, err)
		return
	}
	chunks := r.URL.Query().Get("output") == "chunks"
	eventstream.Serve(w, r, eventstream.Options{Eager: true}, func(ctx context.Context, send func(eventstream.Message) error) (string, error) {
		return a.follow(ctx, id, from, chunks, messageSender(id, send))
	})
}

// messageSender encodes a stream's messages, with the position each
// leaves the viewer at as its id.
func messageSender(id string, send func(eventstream.Message) error) func(StreamMessage, position) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	return func(m StreamMessage, p position) error {
		m.TaskID, m.ID = id, p.String()
		buf.Reset()
		if err := enc.Encode(m); err != nil {
			return err
		}
		return send(eventstream.Message{ID: m.ID, Type: m.Type, Data: bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})})
	}
}

// follow sends task id's messages after from until the task is terminal
// and everything was sent (its closing reason), ctx ends, or send fails.
// It reads the records when woken (see news), and sends a terminal state
// change, and any event after it, only once the output before it is
// sent.
func (a *api) follow(ctx context.Context, id string, from position, chunks bool, send func(StreamMessage, position) error) (string, error) {
	n, err := a.watch(ctx, id)
	if err != nil {
		return "", err
	}
	defer n.close()
	rt := newRecordTails(filepath.Join(a.s.Dir(id), "outbox", "progress"), from)
	defer rt.close()
	pos := from
	type heldEvent struct {
		m   StreamMessage
		end int64
	}
	var held []heldEvent
	for {
		st, err := a.record(id)
		terminal := err == nil && st.State.Terminal()
		err = rt.events(terminal, func(m StreamMessage, end int64) error {
			if len(held) > 0 || m.To.Terminal() {
				held = append(held, heldEvent{m, end})
				return nil
			}
			pos.events = end
			return send(m, pos)
		})
		if err == nil {
			err = rt.output(terminal, func(i int, chunk []byte, end int64) error {
				return sendOutput(chunk, end, chunks, func(m StreamMessage, lineEnd int64) error {
					m.Stream = logStreams[i]
					if i == 0 {
						pos.stdout = lineEnd
					} else {
						pos.stderr = lineEnd
					}
					return send(m, pos)
				})
			})
		}
		if err == nil {
			err = rt.heartbeats(terminal, func(m StreamMessage, beats int64, sent int) error {
				pos.beats, pos.beatSent = beats, sent
				return send(m, pos)
			})
		}
		if err != nil {
			return "", err
		}
		if terminal {
			for _, h := range held {
				pos.events = h.end
				if err := send(h.m, pos); err != nil {
					return "", err
				}
			}
			if st.Error != nil && !pos.final {
				pos.final = true
				if err := send(StreamMessage{Type: "error", Time: st.LastCheckpoint, Error: st.Error}, pos); err != nil {
					return "", err
				}
			}
			return "task " + string(st.State), nil
		}
		if !n.wait(ctx) {
			return "", nil
		}
	}
}

// sendOutput sends a chunk of a log that ends at offset end: in chunks,
// one message, else one per line, each with the offset after it.
func sendOutput(chunk []byte, end int64, chunks bool, send func(m StreamMessage, lineEnd int64) error) error {
	if chunks {
		lines := bytes.Count(chunk, []byte{'\n'})
		text := bytes.TrimSuffix(chunk, []byte{'\n'})
		if len(text) == len(chunk) {
			lines++ // a piece of a long line, or the unterminated last one
		}
		return send(StreamMessage{Type: "output", Text: string(text), Lines: lines}, end)
	}
	off := end - int64(len(chunk))
	return eachLineWithEnd(chunk, func(line []byte, n int) error {
		off += int64(n)
		return send(StreamMessage{Type: "output", Text: string(line)}, off)
	})
}
