package sessionapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/agent-runner/agent-runner/door/eventstream"
	"github.com/agent-runner/agent-runner/door/httpreply"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// EventsPattern is the sandbox's own event stream: it reads the event
// bus, which the API node holds, so it is served there even for a
// sandbox on a remote worker (sessionremote serves it locally).
const EventsPattern = "GET /v1/sandboxes/{id}/events"

// serveEvents streams the sandbox's state changes and its runs' status
// changes (session.FollowEvents) as SSE, or WebSocket text messages on
// an upgrade; each message's id is its bus sequence, and Last-Event-ID
// (or ?last_event_id=) resumes after it. Without one the stream starts
// with the sandbox's current state. It ends once the sandbox ended and
// its final state was sent. An unknown sandbox is answered 404 before
// the stream opens.
func serveEvents(s *session.Service, w http.ResponseWriter, r *http.Request) {
	after := session.FromRecord
	if v := eventstream.ResumeFrom(r, "last_event_id"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			httpreply.Error(w, job.Errorf(job.CodeInvalidRequest, "Last-Event-ID must be an event id").With("field", "last_event_id"))
			return
		}
		after = n
	}
	id := r.PathValue("id")
	if _, err := s.Get(id); err != nil {
		httpreply.Error(w, err)
		return
	}
	// From the record, the first message (its state) comes at once, so
	// the response waits for it: a stream that cannot open is still
	// answered with its error. A resumed stream may wait long for its
	// next event: its response starts at once.
	opts := eventstream.Options{Eager: after != session.FromRecord}
	eventstream.Serve(w, r, opts, func(ctx context.Context, send func(eventstream.Message) error) (string, error) {
		err := s.FollowEvents(ctx, id, after, func(ev session.StreamEvent) error {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			return send(eventstream.Message{ID: strconv.FormatUint(ev.ID, 10), Type: ev.Type, Data: b})
		})
		return "sandbox ended", err
	})
}
