package sessionremote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"

	"github.com/agent-runner/agent-runner/door/httpreply"
	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/natsconn"
	"github.com/agent-runner/agent-runner/session"
)

// Patterns the router treats apart: the create (placed), and the two
// calls a sandbox of a lost worker still answers (from its record).
const (
	createPattern = "POST /v1/sandboxes"
	getPattern    = "GET /v1/sandboxes/{id}"
	deletePattern = "DELETE /v1/sandboxes/{id}"
)

// Wrap routes the sessions routes: local is the route's own handler
// (over this node's Service). A create goes where Router places it;
// a call for a sandbox placed on a worker goes to that worker while the
// sandbox lives there, and answers session.worker_lost once its worker
// was lost (but get and delete, which answer its record); anything
// else, and the sandbox's events stream (sessionapi.EventsPattern: the
// bus is this node's), is local's.
func (r *Router) Wrap(local http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Pattern == createPattern {
			r.create(w, req, local)
			return
		}
		id := req.PathValue("id")
		rec, placed := r.cfg.Service.Placed(id)
		switch {
		case id == "" || !placed || req.Pattern == sessionapi.EventsPattern:
			// The events stream reads this node's bus.
			local.ServeHTTP(w, req)
		case rec.State.Live():
			r.forward(w, req, rec.ID, instance(rec.Worker), nil)
		case rec.Error != nil && rec.Error.Code == job.CodeSessionWorkerLost && req.Pattern != getPattern && req.Pattern != deletePattern:
			httpreply.Error(w, job.Errorf(job.CodeSessionWorkerLost, "sandbox %s failed: %s", rec.ID, rec.Error.Message).
				With("id", rec.ID).With("state", string(rec.State)).With("worker", rec.Worker))
		default:
			local.ServeHTTP(w, req)
		}
	})
}

// create places a create: on this node (local), or on a worker, whose
// id is claimed here first (the request gets one when it has none).
// A create the worker refuses frees the id again.
func (r *Router) create(w http.ResponseWriter, req *http.Request, local http.Handler) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, sessionapi.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			httpreply.Error(w, job.Errorf(job.CodeBodyTooLarge, "body is larger than %d bytes", sessionapi.MaxBodyBytes))
			return
		}
		httpreply.Error(w, job.Wrap(job.CodeInvalidRequest, err, "cannot read body"))
		return
	}
	setBody(req, body)
	var cr session.CreateRequest
	if len(bytes.TrimSpace(body)) > 0 && json.Unmarshal(body, &cr) != nil {
		local.ServeHTTP(w, req) // it answers what is wrong with the body
		return
	}
	if cr.ID != "" {
		if rec, ok := r.cfg.Service.Placed(cr.ID); ok {
			r.again(w, req, rec, local)
			return
		}
		if _, err := r.cfg.Service.Get(cr.ID); err == nil {
			local.ServeHTTP(w, req) // this node's: the same request answers it, another conflicts
			return
		}
	}
	target, err := r.choose(cr.Backend)
	if err != nil {
		httpreply.Error(w, err)
		return
	}
	if target == "" {
		local.ServeHTTP(w, req)
		return
	}
	if cr.ID == "" {
		cr.ID = newID()
		if body, err = withID(body, cr.ID); err != nil {
			httpreply.Error(w, err)
			return
		}
		setBody(req, body)
	}
	rec, created, err := r.cfg.Service.Place(cr, string(target))
	if err != nil {
		httpreply.Error(w, err)
		return
	}
	if !created {
		// The same create raced this one and placed it.
		if rec, ok := r.cfg.Service.Placed(cr.ID); ok {
			r.again(w, req, rec, local)
			return
		}
		local.ServeHTTP(w, req)
		return
	}
	r.forward(w, req, rec.ID, target, func() { r.cfg.Service.Unplace(rec.ID, string(target)) })
}

// again answers a create repeated for placed sandbox rec: its worker
// while it lives (the same request answers it, another conflicts), else
// this node from its record.
func (r *Router) again(w http.ResponseWriter, req *http.Request, rec session.Record, local http.Handler) {
	if rec.State.Live() {
		r.forward(w, req, rec.ID, instance(rec.Worker), nil)
		return
	}
	local.ServeHTTP(w, req)
}

// forward sends req whole to worker inst (a WebSocket upgrade and
// streamed bodies included) and copies its answer back. refused, when
// set, is called when the worker answers anything but success or cannot
// be reached.
func (r *Router) forward(w http.ResponseWriter, req *http.Request, id string, inst instance, refused func()) {
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The URL names the worker to dial; the Host stays the
			// caller's, which a WebSocket's Origin is checked against
			// there as it was here.
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", string(inst), pr.In.Host
			// The API node authorized the call; the worker never sees
			// the caller's token. (Cookies go on, as the ports route
			// passes them to a sandbox's server; serve takes none.)
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Proxy-Authorization")
		},
		Transport:     r.tr,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(r.cfg.Logger.Handler(), slog.LevelDebug),
		ModifyResponse: func(resp *http.Response) error {
			if refused != nil && resp.StatusCode >= 300 {
				refused()
			}
			switch {
			case resp.StatusCode >= 300:
			case recordPatterns[req.Pattern]:
				return stampWorker(resp, inst)
			case runPatterns[req.Pattern] != "":
				return r.claimRun(req.Context(), resp, id, runPatterns[req.Pattern], inst)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			if refused != nil {
				refused()
			}
			if req.Context().Err() != nil {
				return // the caller went away
			}
			httpreply.Error(w, unreachable(id, inst, err))
		},
	}
	p.ServeHTTP(w, req)
}

// unreachable is session.worker_lost for a call the worker holding
// sandbox id did not answer.
func unreachable(id string, inst instance, err error) error {
	msg := "the worker holding sandbox " + id + " does not answer"
	if errors.Is(err, natsconn.ErrNoListener) {
		msg = "the worker holding sandbox " + id + " is not connected"
	}
	e := job.Wrap(job.CodeSessionWorkerLost, err, msg).With("id", id).With("worker", string(inst))
	if errors.Is(err, context.DeadlineExceeded) {
		e.With("timed_out", true)
	}
	return e
}

// recordPatterns are the routes that answer a sandbox's record.
var recordPatterns = map[string]bool{
	createPattern: true, getPattern: true, deletePattern: true,
	"POST /v1/sandboxes/{id}/timeout": true, "POST /v1/sandboxes/{id}/pause": true, "POST /v1/sandboxes/{id}/resume": true,
}

// maxRecordBytes bounds a record answer stampWorker rewrites.
const maxRecordBytes = 1 << 20

// stampWorker sets "worker" in a record a worker answered (it knows
// itself only as this process), as the API node's own copy has it.
func stampWorker(resp *http.Response, inst instance) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRecordBytes+1))
	resp.Body.Close()
	if err != nil || len(body) > maxRecordBytes {
		return job.Errorf(job.CodeSessionWorkerLost, "the worker's answer is not a sandbox record").With("worker", string(inst))
	}
	// The field goes last, the others keep their order.
	var rec map[string]json.RawMessage
	trimmed := bytes.TrimRight(body, " \r\n\t")
	if json.Unmarshal(body, &rec) == nil && len(rec) > 0 && rec["worker"] == nil && bytes.HasSuffix(trimmed, []byte("}")) {
		name, _ := json.Marshal(string(inst))
		stamped := append(slices.Clone(bytes.TrimRight(trimmed[:len(trimmed)-1], " \r\n\t")), ",\n  \"worker\": "...)
		body = append(append(stamped, name...), "\n}\n"...)
	}
	setResponseBody(resp, body)
	return nil
}

// setResponseBody makes body resp's body.
func setResponseBody(resp *http.Response, body []byte) {
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
}

// setBody makes body req's body.
func setBody(req *http.Request, body []byte) {
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}

// withID is the create body with id set.
func withID(body []byte, id string) ([]byte, error) {
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, job.Wrap(job.CodeInvalidRequest, err, "body is not the JSON this route takes")
		}
	}
	m["id"], _ = json.Marshal(id)
	return json.Marshal(m)
}

// newID mints a sandbox id as session does ("sbx_<16 hex>").
func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "sbx_" + hex.EncodeToString(b[:])
}
