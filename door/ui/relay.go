package ui

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agent-runner/agent-runner/httpreply"
	"github.com/agent-runner/agent-runner/job"
)

// relay serves GET /ui-api/tasks/{id}/stream: the messages of the task
// API's WebSocket /ws/tasks/{id}/stream, one JSON object per line, over a
// plain streaming response. A browser's WebSocket cannot carry an
// Authorization header and EventSource cannot either; fetch can, so the
// page reads this. The relay dials the WebSocket route through serve's own
// router in-process (no socket, no second listener), forwarding the
// caller's Authorization header, so the route's own scope check and
// behaviour are what the page gets. It asks for output in chunks
// (?output=chunks), and reads the next message only once the page took the
// last: the route reads the task's records at the page's pace.
type relay struct {
	ln  *pipeListener
	hc  *http.Client
	srv *http.Server
}

func newRelay(ctx context.Context, mux http.Handler) *relay {
	ln := newPipeListener()
	r := &relay{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	r.hc = &http.Client{Transport: &http.Transport{DialContext: ln.dial}}
	go r.srv.Serve(ln)
	go func() {
		<-ctx.Done()
		r.srv.Close()
	}()
	return r
}

func (rl *relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		httpreply.Error(w, job.Errorf(job.CodeInternal, "streaming unsupported"))
		return
	}
	// Output in chunks of lines, not a message a line: the page renders
	// a chunk at a time, and a flood costs a message per 64 KiB.
	target := "ws://agent-runner.internal/ws/tasks/" + url.PathEscape(r.PathValue("id")) + "/stream?output=chunks"
	hdr := http.Header{}
	if v := r.Header.Get("Authorization"); v != "" {
		hdr.Set("Authorization", v)
	}
	c, resp, err := websocket.Dial(r.Context(), target, &websocket.DialOptions{HTTPClient: rl.hc, HTTPHeader: hdr})
	if err != nil {
		// The route answered without upgrading: pass its status and JSON
		// error on (job.not_found, auth.forbidden...).
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(resp.StatusCode)
			if resp.Body != nil {
				copyBody(w, resp)
			}
			return
		}
		httpreply.Error(w, job.Wrap(job.CodeInternal, err, "cannot open the task stream"))
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(4 << 20)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	for {
		_, msg, err := c.Read(r.Context())
		if err != nil {
			// A normal close is the end of a terminal task's stream.
			var ce websocket.CloseError
			if errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure {
				c.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		if _, err := w.Write(append(msg, '\n')); err != nil {
			return
		}
		fl.Flush()
	}
}

func copyBody(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		w.Write(buf[:n])
		if err != nil {
			return
		}
	}
}

// pipeListener is an in-memory net.Listener: dial hands one end of a
// net.Pipe to Accept.
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "agent-runner.internal" }
