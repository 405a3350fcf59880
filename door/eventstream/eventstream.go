// Package eventstream is the one Server-Sent Events and WebSocket
// implementation of the HTTP doors: a job's events, GET /v1/events (every
// kind's state), a task's stream and its logs. A door says what to send
// (a Follow that produces Messages, each with the id a client resumes
// after); Serve writes them as SSE, or as WebSocket text messages when
// the request is a WebSocket handshake, with keep-alives, backpressure
// (the next message is produced once the last was written) and one way
// to read where a client resumes (ResumeFrom). It knows no door and no
// kind of event.
package eventstream

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/door/httpreply"
)

// Message is one event of a stream.
type Message struct {
	// ID is where a client that got this message resumes (the SSE id
	// line; a WebSocket client reads it from Data); empty for none.
	ID string
	// Type is the SSE event name.
	Type string
	// Data is the message: a JSON object on one line (the SSE data line,
	// the WebSocket text message).
	Data []byte
}

// Follow produces a stream's messages in order, calling send with each,
// until the stream is complete (nil), ctx ends (nil), or send or the
// stream fails (that error). done is why a WebSocket closes normally
// after a complete stream ("job finished").
type Follow func(ctx context.Context, send func(Message) error) (done string, err error)

// Options shape a stream.
type Options struct {
	// KeepAlive is how often an idle SSE stream gets a comment line, so
	// proxies keep it open (default 15 s).
	KeepAlive time.Duration
	// Eager starts an SSE response at once. Otherwise it starts with the
	// first message, and an error of Follow before that is answered as an
	// error (httpreply.Error) instead of an empty stream.
	Eager bool
	// WriteTimeout bounds the write of one WebSocket message (default
	// 30 s): a client that takes nothing for that long is dropped.
	WriteTimeout time.Duration
}

// Serve answers r with follow's messages: over a WebSocket when r is a
// WebSocket handshake, else as Server-Sent Events.
func Serve(w http.ResponseWriter, r *http.Request, opts Options, follow Follow) {
	if IsWebSocket(r) {
		serveWebSocket(w, r, opts, follow)
		return
	}
	serveSSE(w, r, opts, follow)
}

// IsWebSocket reports whether r asks to upgrade to a WebSocket.
func IsWebSocket(r *http.Request) bool {
	return headerHas(r.Header, "Connection", "upgrade") && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// ResumeFrom is where the client of r resumes: its Last-Event-ID header
// (an SSE client that reconnects), else the query parameter param (a
// WebSocket or fetch client that cannot or did not set the header); ""
// for the start.
func ResumeFrom(r *http.Request, param string) string {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		return v
	}
	if param == "" {
		return ""
	}
	return r.URL.Query().Get(param)
}

func (o Options) keepAlive() time.Duration {
	if o.KeepAlive > 0 {
		return o.KeepAlive
	}
	return 15 * time.Second
}

func (o Options) writeTimeout() time.Duration {
	if o.WriteTimeout > 0 {
		return o.WriteTimeout
	}
	return 30 * time.Second
}

// writeError answers an error before a stream began.
func writeError(w http.ResponseWriter, err error) { httpreply.Error(w, err) }
