package taskapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"
)

// logs streams stdout.log and stderr.log as SSE events (stdout, stderr),
// one per line, following them until the task is terminal; completed
// comes after the last line (an unterminated one included). The logs are
// read from this request's own offsets a chunk at a time, as the
// connection takes them (see tail). Keep-alive comments go out every
// 15 s.
func (a *api) logs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.status(id); err != nil {
		writeError(w, err)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, errors.New("streaming unsupported"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rt := newRecordTails(filepath.Join(a.s.Dir(id), "outbox", "progress"))
	defer rt.close()
	lastSend := time.Now()
	send := func(stream string, chunk []byte) error {
		lastSend = time.Now()
		err := eachLine(chunk, func(line []byte) error {
			b, _ := json.Marshal(map[string]string{"task_id": id, "line": string(line)})
			_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", stream, b)
			return err
		})
		fl.Flush()
		return err
	}
	for {
		rec, err := a.record(id)
		terminal := err == nil && rec.State.Terminal()
		if rt.output(terminal, send) != nil {
			return
		}
		if terminal {
			st, _ := a.status(id)
			b, _ := json.Marshal(st)
			fmt.Fprintf(w, "event: completed\ndata: %s\n\n", b)
			fl.Flush()
			return
		}
		if time.Since(lastSend) > 15*time.Second {
			fmt.Fprint(w, ": keep-alive\n\n")
			lastSend = time.Now()
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(streamPoll):
		}
	}
}
