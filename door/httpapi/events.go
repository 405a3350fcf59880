package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/jobs"
)

// StreamEvent is one event as sent over SSE (data line) and WebSocket.
type StreamEvent = jobs.Event

// events serves one job's Server-Sent Events; ids are event-stream
// sequences, so a reconnecting client resumes with Last-Event-ID.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	lastID, err := lastEventID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("job_id")
	if err := s.jobs.Exists(id); err != nil {
		writeError(w, err)
		return
	}
	s.stream(w, r, true, func(ctx context.Context, send func(StreamEvent) error) error {
		return s.jobs.Follow(ctx, id, lastID, send)
	})
}

// allEvents serves GET /v1/events: every job's status events, every
// agent task's state changes and every capability run's progress as
// Server-Sent Events (jobs.FollowAll), opened by a ready event;
// Last-Event-ID resumes.
func (s *Server) allEvents(w http.ResponseWriter, r *http.Request) {
	lastID, err := lastEventID(r)
	if err == nil && r.Header.Get("Last-Event-ID") == "" {
		lastID = jobs.FromNow
	}
	if err != nil {
		writeError(w, err)
		return
	}
	// The ready event comes at once, so headers wait for it: a stream
	// that cannot be opened is still answered with its error.
	s.stream(w, r, false, func(ctx context.Context, send func(StreamEvent) error) error {
		return s.jobs.FollowAll(ctx, lastID, send)
	})
}

func lastEventID(r *http.Request) (uint64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, job.Errorf(job.CodeInvalidRequest, "Last-Event-ID must be an event id")
	}
	return n, nil
}

// stream writes what follow sends as an event stream, with comment lines
// while it is idle. The response starts at once when eager, else with the
// first line; an error of follow before that is answered as an error.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, eager bool, follow func(context.Context, func(StreamEvent) error) error) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, job.Errorf(job.CodeInternal, "streaming unsupported"))
		return
	}
	sw := &sseWriter{w: w, flusher: flusher}
	if eager {
		sw.start()
	}
	streamCtx, stop := context.WithCancel(r.Context())
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
				_ = sw.write(": keep-alive\n\n")
			}
		}
	}()
	err := follow(streamCtx, func(ev StreamEvent) error {
		b, _ := json.Marshal(ev)
		if ev.ID > 0 || ev.Type == jobs.EventReady {
			// The ready event's id is where the feed starts, 0 on an empty
			// stream: a client that reconnects with it misses nothing.
			return sw.write("id: %d\nevent: %s\ndata: %s\n\n", ev.ID, ev.Type, b)
		}
		return sw.write("event: %s\ndata: %s\n\n", ev.Type, b)
	})
	if err == nil {
		return
	}
	stop()
	<-keepAliveDone
	if !sw.started() {
		writeError(w, err)
	}
}

// sseWriter writes event-stream lines, starting the response with the
// first; the keep-alive goroutine and the follower share it.
type sseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	mu      sync.Mutex
	began   bool
}

func (sw *sseWriter) start() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.begin()
}

func (sw *sseWriter) begin() {
	if sw.began {
		return
	}
	sw.began = true
	h := sw.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	sw.w.WriteHeader(http.StatusOK)
	sw.flusher.Flush()
}

func (sw *sseWriter) started() bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.began
}

func (sw *sseWriter) write(format string, args ...any) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.begin()
	if _, err := fmt.Fprintf(sw.w, format, args...); err != nil {
		return err
	}
	sw.flusher.Flush()
	return nil
}

// websocket serves the same stream as JSON text messages.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("job_id")
	if err := s.jobs.Exists(id); err != nil {
		writeError(w, err)
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
	err = s.jobs.Follow(ctx, id, lastID, func(ev StreamEvent) error {
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
