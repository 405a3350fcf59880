package taskapi

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agent-runner/agent-runner/door/eventstream"
	"github.com/agent-runner/agent-runner/job"
)

// logs streams stdout.log and stderr.log as SSE events (stdout, stderr),
// one per line, following them until the task is terminal; completed
// comes after the last line (an unterminated one included). The logs are
// read from this request's own offsets a chunk at a time, as the
// connection takes them (see tail), whenever the task's events say they
// may have grown (see news). Each event's id is where both logs stand
// after it ("<stdout bytes>.<stderr bytes>"), so a client that reconnects
// with Last-Event-ID resumes after that line: no gap, no repeat.
// Keep-alive comments go out every 15 s.
func (a *api) logs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.status(id); err != nil {
		writeError(w, err)
		return
	}
	from, err := logPosition(eventstream.ResumeFrom(r, ""))
	if err != nil {
		writeError(w, err)
		return
	}
	eventstream.Serve(w, r, eventstream.Options{Eager: true}, func(ctx context.Context, send func(eventstream.Message) error) (string, error) {
		return "", a.followLogs(ctx, id, from, send)
	})
}

// followLogs sends the lines of task id's logs after from, then
// completed, until ctx ends or send fails.
func (a *api) followLogs(ctx context.Context, id string, from position, send func(eventstream.Message) error) error {
	n, err := a.watch(ctx, id)
	if err != nil {
		return err
	}
	defer n.close()
	rt := newRecordTails(filepath.Join(a.s.Dir(id), "outbox", "progress"), from)
	defer rt.close()
	pos := [2]int64{from.stdout, from.stderr}
	for {
		rec, err := a.record(id)
		terminal := err == nil && rec.State.Terminal()
		err = rt.output(terminal, func(i int, chunk []byte, end int64) error {
			return sendOutput(chunk, end, false, func(m StreamMessage, lineEnd int64) error {
				pos[i] = lineEnd
				b, _ := json.Marshal(map[string]string{"task_id": id, "line": m.Text})
				return send(eventstream.Message{ID: logID(pos), Type: logStreams[i], Data: b})
			})
		})
		if err != nil {
			return err
		}
		if terminal {
			st, _ := a.status(id)
			b, _ := json.Marshal(st)
			return send(eventstream.Message{ID: logID(pos), Type: "completed", Data: b})
		}
		if !n.wait(ctx) {
			return nil
		}
	}
}

// logID is a logs stream's event id: where both logs stand.
func logID(pos [2]int64) string {
	return strconv.FormatInt(pos[0], 10) + "." + strconv.FormatInt(pos[1], 10)
}

// logPosition reads a logs stream's Last-Event-ID: "<stdout>.<stderr>"
// byte offsets, or none (from the start).
func logPosition(v string) (position, error) {
	var pos position
	if v == "" {
		return pos, nil
	}
	a, b, ok := strings.Cut(v, ".")
	var err error
	if ok {
		if pos.stdout, err = strconv.ParseInt(a, 10, 64); err == nil {
			pos.stderr, err = strconv.ParseInt(b, 10, 64)
		}
	}
	if !ok || err != nil || pos.stdout < 0 || pos.stderr < 0 {
		return pos, job.Errorf(job.CodeInvalidRequest, "Last-Event-ID %q is not an event id of this stream (<stdout bytes>.<stderr bytes>)", v)
	}
	return pos, nil
}
