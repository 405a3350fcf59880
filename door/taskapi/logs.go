package taskapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// logs streams stdout.log and stderr.log as SSE events (stdout, stderr),
// one per line, following them until the task is terminal; completed
// comes after the last line (an unterminated one included). The logs are
// read from this request's own offsets a chunk at a time, as the
// connection takes them (see tail). Each line's event id is where both
// logs stand after it ("<stdout bytes>.<stderr bytes>"), so a client that
// reconnects with Last-Event-ID resumes after that line: no gap, no
// repeat. Keep-alive comments go out every 15 s.
func (a *api) logs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.status(id); err != nil {
		writeError(w, err)
		return
	}
	from, err := logPosition(r.Header.Get("Last-Event-ID"))
	if err != nil {
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
	rt.logs[0].off, rt.logs[1].off = from[0], from[1]
	lastSend := time.Now()
	send := func(stream string, chunk []byte) error {
		lastSend = time.Now()
		i := 0
		if stream == logStreams[1] {
			i = 1
		}
		// The tail has moved past the chunk; each line's id is where
		// this log stands after it, the other log where it stands now.
		pos := [2]int64{rt.logs[0].off, rt.logs[1].off}
		pos[i] -= int64(len(chunk))
		err := eachLineWithEnd(chunk, func(line []byte, consumed int) error {
			pos[i] += int64(consumed)
			b, _ := json.Marshal(map[string]string{"task_id": id, "line": string(line)})
			_, err := fmt.Fprintf(w, "id: %d.%d\nevent: %s\ndata: %s\n\n", pos[0], pos[1], stream, b)
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

// logPosition reads a logs stream's Last-Event-ID: "<stdout>.<stderr>"
// byte offsets, or none (from the start).
func logPosition(v string) ([2]int64, error) {
	var pos [2]int64
	if v == "" {
		return pos, nil
	}
	a, b, ok := strings.Cut(v, ".")
	var err error
	if ok {
		if pos[0], err = strconv.ParseInt(a, 10, 64); err == nil {
			pos[1], err = strconv.ParseInt(b, 10, 64)
		}
	}
	if !ok || err != nil || pos[0] < 0 || pos[1] < 0 {
		return pos, job.Errorf(job.CodeInvalidRequest, "Last-Event-ID %q is not an event id of this stream (<stdout bytes>.<stderr bytes>)", v)
	}
	return pos, nil
}

// eachLineWithEnd is eachLine with the bytes each line took of the chunk
// (its "\n" included).
func eachLineWithEnd(chunk []byte, fn func(line []byte, consumed int) error) error {
	for len(chunk) > 0 {
		line, rest, found := bytes.Cut(chunk, []byte{'\n'})
		n := len(line)
		if found {
			n++
		}
		if err := fn(line, n); err != nil {
			return err
		}
		chunk = rest
	}
	return nil
}
