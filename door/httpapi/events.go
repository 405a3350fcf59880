package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/agent-runner/agent-runner/door/eventstream"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/jobs"
)

// StreamEvent is one event as sent over SSE (data line) and WebSocket.
type StreamEvent = jobs.Event

// resumeParam is the query parameter a WebSocket client (which cannot set
// Last-Event-ID) resumes with.
const resumeParam = "last_event_id"

// events serves one job's Server-Sent Events; ids are event-stream
// sequences, so a reconnecting client resumes with Last-Event-ID.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	s.jobEvents(w, r, eventstream.Options{KeepAlive: s.cfg.KeepAlive, Eager: true})
}

// websocket serves the same stream as JSON text messages (each with its
// id); ?last_event_id= resumes.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	s.jobEvents(w, r, eventstream.Options{})
}

func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request, opts eventstream.Options) {
	lastID, err := parseEventID(r.Header.Get("Last-Event-ID"))
	if err != nil {
		writeError(w, err)
		return
	}
	if v := r.URL.Query().Get(resumeParam); v != "" && r.Header.Get("Last-Event-ID") == "" {
		lastID, _ = strconv.ParseUint(v, 10, 64) // as before: a malformed one is the start
	}
	id := r.PathValue("job_id")
	if err := s.jobs.Exists(id); err != nil {
		writeError(w, err)
		return
	}
	eventstream.Serve(w, r, opts, func(ctx context.Context, send func(eventstream.Message) error) (string, error) {
		return "job finished", s.jobs.Follow(ctx, id, lastID, sendEvent(send))
	})
}

// allEvents serves GET /v1/events: every job's status events, every
// agent task's state changes and every capability run's progress as
// Server-Sent Events (jobs.FollowAll), opened by a ready event;
// Last-Event-ID resumes.
func (s *Server) allEvents(w http.ResponseWriter, r *http.Request) {
	v := eventstream.ResumeFrom(r, "")
	lastID, err := parseEventID(v)
	if err != nil {
		writeError(w, err)
		return
	}
	if v == "" {
		lastID = jobs.FromNow
	}
	// The ready event comes at once, so headers wait for it: a stream
	// that cannot be opened is still answered with its error.
	eventstream.Serve(w, r, eventstream.Options{KeepAlive: s.cfg.KeepAlive}, func(ctx context.Context, send func(eventstream.Message) error) (string, error) {
		return "", s.jobs.FollowAll(ctx, lastID, sendEvent(send))
	})
}

// sendEvent sends jobs' events as stream messages; the id is the event's
// sequence, none for one replayed from the record (0), except the ready
// event's, where the feed starts (0 on an empty stream: a client that
// reconnects with it misses nothing).
func sendEvent(send func(eventstream.Message) error) func(StreamEvent) error {
	return func(ev StreamEvent) error {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		m := eventstream.Message{Type: ev.Type, Data: b}
		if ev.ID > 0 || ev.Type == jobs.EventReady {
			m.ID = strconv.FormatUint(ev.ID, 10)
		}
		return send(m)
	}
}

// parseEventID reads a job stream's event id ("" is 0, the start).
func parseEventID(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, job.Errorf(job.CodeInvalidRequest, "Last-Event-ID must be an event id")
	}
	return n, nil
}
