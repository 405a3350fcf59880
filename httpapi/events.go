package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
)

// StreamEvent is one event as sent over SSE (data line) and WebSocket.
type StreamEvent struct {
	ID     uint64     `json:"id"`
	Type   string     `json:"type"`
	JobID  string     `json:"job_id"`
	Status job.Status `json:"status,omitempty"`
	// Text is an output chunk as UTF-8 (invalid bytes replaced); Base64
	// carries the exact bytes when the chunk is not valid UTF-8.
	Text    string    `json:"text,omitempty"`
	Base64  []byte    `json:"base64,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Time    time.Time `json:"time"`
	// Egress is an egress gateway decision (type "egress").
	Egress json.RawMessage `json:"egress,omitempty"`
}

func toStream(ev queue.Sequenced) StreamEvent {
	se := StreamEvent{ID: ev.Seq, Type: ev.Type, JobID: ev.JobID, Status: ev.Status, Attempt: ev.Attempt, Time: ev.Time}
	if ev.Type == queue.EventEgress {
		se.Egress = json.RawMessage(ev.Data)
		return se
	}
	if len(ev.Data) > 0 {
		se.Text = string(ev.Data)
		if !utf8.Valid(ev.Data) {
			se.Base64 = ev.Data
		}
	}
	return se
}

// follow delivers a job's events after lastID until the terminal status
// event or ctx ends. A finished job whose live events have expired (a
// restart, or older than the events stream keeps) is replayed from its
// record instead.
func (s *Server) follow(ctx context.Context, id string, lastID uint64, send func(StreamEvent) error) error {
	st := s.cfg.Runner.Store()
	if _, err := st.ReadStatus(id); err != nil {
		return job.Errorf(job.CodeJobNotFound, "job not found").With("job_id", id)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := s.cfg.Queue.Events(ctx, id, lastID)
	if err != nil {
		return err
	}
	idle := time.NewTimer(500 * time.Millisecond)
	defer idle.Stop()
	seen := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			seen = true
			if err := send(toStream(ev)); err != nil {
				return err
			}
			if ev.Type == queue.EventStatus && ev.Status.Terminal() {
				return nil
			}
		case <-idle.C:
			// No live events: if the job is already finished, send what
			// the record holds and stop.
			if res, err := st.ReadResult(id); err == nil {
				if !seen && lastID == 0 {
					return sendRecorded(res, send)
				}
				// The client already has the output; close with the
				// terminal status.
				return send(StreamEvent{Type: queue.EventStatus, JobID: id, Status: res.Status, Attempt: res.Attempt, Time: res.EndedAt})
			}
			idle.Reset(time.Second)
		}
	}
}

func sendRecorded(res job.Result, send func(StreamEvent) error) error {
	for _, out := range []struct {
		typ string
		o   job.Output
	}{{queue.EventStdout, res.Stdout}, {queue.EventStderr, res.Stderr}} {
		if out.o.Text != "" {
			if err := send(StreamEvent{Type: out.typ, JobID: res.JobID, Text: out.o.Text, Time: res.EndedAt}); err != nil {
				return err
			}
		}
	}
	return send(StreamEvent{Type: queue.EventStatus, JobID: res.JobID, Status: res.Status, Attempt: res.Attempt, Time: res.EndedAt})
}

// events serves Server-Sent Events; ids are event-stream sequences, so a
// reconnecting client resumes with Last-Event-ID.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, job.Errorf(job.CodeInternal, "streaming unsupported"))
		return
	}
	var lastID uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, job.Errorf(job.CodeInvalidRequest, "Last-Event-ID must be an event id"))
			return
		}
		lastID = n
	}
	id := r.PathValue("job_id")
	if _, err := s.cfg.Runner.Store().ReadStatus(id); err != nil {
		writeError(w, job.Errorf(job.CodeJobNotFound, "job not found").With("job_id", id))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	ctx := r.Context()
	var mu sync.Mutex
	write := func(format string, args ...any) error {
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		flusher.Flush()
		return nil
	}
	streamCtx, stop := context.WithCancel(ctx)
	keepAliveDone := make(chan struct{})
	// The keep-alive goroutine must be gone before the handler returns:
	// the ResponseWriter is invalid after that.
	defer func() { stop(); <-keepAliveDone }()
	go func() {
		defer close(keepAliveDone)
		// Comment lines keep proxies from closing an idle stream.
		t := time.NewTicker(s.cfg.KeepAlive)
		defer t.Stop()
		for {
			select {
			case <-streamCtx.Done():
				return
			case <-t.C:
				_ = write(": keep-alive\n\n")
			}
		}
	}()
	_ = s.follow(streamCtx, id, lastID, func(ev StreamEvent) error {
		b, _ := json.Marshal(ev)
		if ev.ID > 0 {
			return write("id: %d\nevent: %s\ndata: %s\n\n", ev.ID, ev.Type, b)
		}
		return write("event: %s\ndata: %s\n\n", ev.Type, b)
	})
}

// websocket serves the same stream as JSON text messages.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("job_id")
	if _, err := s.cfg.Runner.Store().ReadStatus(id); err != nil {
		writeError(w, job.Errorf(job.CodeJobNotFound, "job not found").With("job_id", id))
		return
	}
	var lastID uint64
	if v := r.URL.Query().Get("last_event_id"); v != "" {
		lastID, _ = strconv.ParseUint(v, 10, 64)
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context())
	err = s.follow(ctx, id, lastID, func(ev StreamEvent) error {
		b, _ := json.Marshal(ev)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return c.Write(wctx, websocket.MessageText, b)
	})
	if err != nil {
		c.Close(websocket.StatusInternalError, "stream failed")
		return
	}
	c.Close(websocket.StatusNormalClosure, "job finished")
}
