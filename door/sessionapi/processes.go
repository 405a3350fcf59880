package sessionapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/agent-runner/agent-runner/door/eventstream"
	"github.com/agent-runner/agent-runner/door/httpreply"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// MaxStdinBytes bounds one POST .../stdin body.
const MaxStdinBytes = 1 << 20

// pid reads the {pid} of r's path, answering an error when it is none.
func pid(w http.ResponseWriter, r *http.Request) (int, bool) {
	p, err := session.ParsePID(r.PathValue("pid"))
	if err != nil {
		httpreply.Error(w, err)
		return 0, false
	}
	return p, true
}

func serveStartProcess(s *session.Service, w http.ResponseWriter, r *http.Request) {
	var req session.ProcessRequest
	if !decode(w, r, &req) {
		return
	}
	id := r.PathValue("id")
	info, err := s.StartProcess(r.Context(), id, req)
	if err == nil {
		w.Header().Set("Location", "/v1/sandboxes/"+id+"/processes/"+strconv.Itoa(info.PID))
	}
	reply(w, http.StatusCreated, info, err)
}

func serveListProcesses(s *session.Service, w http.ResponseWriter, r *http.Request) {
	infos, err := s.Processes(r.PathValue("id"))
	reply(w, http.StatusOK, map[string]any{"processes": infos}, err)
}

func serveGetProcess(s *session.Service, w http.ResponseWriter, r *http.Request) {
	if p, ok := pid(w, r); ok {
		info, err := s.Process(r.PathValue("id"), p)
		reply(w, http.StatusOK, info, err)
	}
}

func serveKillProcess(s *session.Service, w http.ResponseWriter, r *http.Request) {
	if p, ok := pid(w, r); ok {
		info, err := s.KillProcess(r.Context(), r.PathValue("id"), p)
		reply(w, http.StatusOK, info, err)
	}
}

// serveStdin passes the raw body to the process's input; ?eof=true then
// ends it.
func serveStdin(s *session.Service, w http.ResponseWriter, r *http.Request) {
	p, ok := pid(w, r)
	if !ok {
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxStdinBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			httpreply.Error(w, job.Errorf(job.CodeBodyTooLarge, "stdin is larger than %d bytes", MaxStdinBytes))
			return
		}
		httpreply.Error(w, job.Wrap(job.CodeInvalidRequest, err, "cannot read body"))
		return
	}
	eof, _ := strconv.ParseBool(r.URL.Query().Get("eof"))
	err = s.WriteStdin(r.Context(), r.PathValue("id"), p, data, eof)
	reply(w, http.StatusOK, map[string]any{"written_bytes": len(data), "eof": eof}, err)
}

func serveSignal(s *session.Service, w http.ResponseWriter, r *http.Request) {
	p, ok := pid(w, r)
	if !ok {
		return
	}
	var req struct {
		Signal string `json:"signal"`
	}
	if !decode(w, r, &req) {
		return
	}
	sig, err := session.ParseSignal(req.Signal)
	if err == nil {
		err = s.SignalProcess(r.PathValue("id"), p, sig)
	}
	reply(w, http.StatusOK, map[string]any{"signal": req.Signal}, err)
}

func serveResize(s *session.Service, w http.ResponseWriter, r *http.Request) {
	p, ok := pid(w, r)
	if !ok {
		return
	}
	var size session.PtySize
	if !decode(w, r, &size) {
		return
	}
	err := s.ResizeProcess(r.PathValue("id"), p, size)
	reply(w, http.StatusOK, size, err)
}

// serveProcessEvents streams the process's events (SSE, or WebSocket
// text messages) from ?offset=N or Last-Event-ID: each event's id is
// the byte offset to resume from.
func serveProcessEvents(s *session.Service, w http.ResponseWriter, r *http.Request) {
	p, ok := pid(w, r)
	if !ok {
		return
	}
	var from int64
	if v := eventstream.ResumeFrom(r, "offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			httpreply.Error(w, job.Errorf(job.CodeInvalidRequest, "offset must be a byte offset (0 or more)").With("field", "offset"))
			return
		}
		from = n
	}
	id := r.PathValue("id")
	eventstream.Serve(w, r, eventstream.Options{}, func(ctx context.Context, send func(eventstream.Message) error) (string, error) {
		err := s.FollowProcess(ctx, id, p, from, func(ev session.ProcessEvent) error {
			b, err := json.Marshal(ev.Data)
			if err != nil {
				return job.Wrap(job.CodeInternal, err, "cannot encode an event")
			}
			return send(eventstream.Message{ID: strconv.FormatInt(ev.Offset, 10), Type: ev.Type, Data: b})
		})
		return "process exited", err
	})
}
