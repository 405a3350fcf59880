package eventstream

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// serveSSE writes follow's messages as an event stream, with comment
// lines while it is idle.
func serveSSE(w http.ResponseWriter, r *http.Request, opts Options, follow Follow) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, job.Errorf(job.CodeInternal, "streaming unsupported"))
		return
	}
	sw := &sseWriter{w: w, flusher: flusher}
	if opts.Eager {
		sw.start()
	}
	ctx, stop := context.WithCancel(r.Context())
	keepAliveDone := make(chan struct{})
	// The keep-alive goroutine must be gone before the handler returns:
	// the ResponseWriter is invalid after that.
	defer func() { stop(); <-keepAliveDone }()
	go func() {
		defer close(keepAliveDone)
		t := time.NewTicker(opts.keepAlive())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = sw.write(": keep-alive\n\n")
			}
		}
	}()
	_, err := follow(ctx, func(m Message) error {
		if m.ID != "" {
			return sw.write("id: %s\nevent: %s\ndata: %s\n\n", m.ID, m.Type, m.Data)
		}
		return sw.write("event: %s\ndata: %s\n\n", m.Type, m.Data)
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
