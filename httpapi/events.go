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
	if err := s.jobs.Exists(id); err != nil {
		writeError(w, err)
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
	_ = s.jobs.Follow(streamCtx, id, lastID, func(ev StreamEvent) error {
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
