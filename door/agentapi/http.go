// Package agentapi is serve's capability-runs door: the HTTP routes of
// /v1/agent-runs over the capability-run service (agent/runs), which
// launches, runs, bounds and records the runs. The door reads requests,
// calls the service and writes its answers; it keeps no state of its own.
package agentapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/agent-runner/agent-runner/agent/runs"
	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/door/httpreply"
	"github.com/agent-runner/agent-runner/job"
)

// MaxBodyBytes bounds a launch request (manifest and task together).
const MaxBodyBytes = 2 << 20

type route struct {
	pattern, scope string
	h              func(*runs.Service, http.ResponseWriter, *http.Request)
}

var routes = []route{
	{"POST /v1/agent-runs", auth.ScopeSubmit, serveLaunch},
	{"GET /v1/agent-runs", auth.ScopeRead, serveList},
	{"GET /v1/agent-runs/{id}", auth.ScopeRead, serveGet},
	{"GET /v1/agent-runs/{id}/audit", auth.ScopeRead, serveAudit},
}

// Routes registers the capability-runs routes over s on mux, each
// wrapped with wrap(scope, h) (serve's Auth).
func Routes(mux *http.ServeMux, s *runs.Service, wrap func(scope string, h http.Handler) http.Handler) {
	for _, r := range routes {
		h := r.h
		mux.Handle(r.pattern, wrap(r.scope, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { h(s, w, req) })))
	}
}

// Patterns lists the routes Routes registers ("METHOD /path").
func Patterns() []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.pattern
	}
	return out
}

func serveLaunch(s *runs.Service, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			httpreply.Error(w, job.Errorf(job.CodeBodyTooLarge, "body is larger than %d bytes", MaxBodyBytes))
			return
		}
		httpreply.Error(w, job.Wrap(job.CodeInvalidRequest, err, "cannot read body"))
		return
	}
	var req runs.LaunchRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		httpreply.Error(w, job.Wrap(job.CodeInvalidRequest, err, "body is not a JSON launch request"))
		return
	}
	info, err := s.Launch(req)
	if err != nil {
		httpreply.Error(w, err)
		return
	}
	w.Header().Set("Location", "/v1/agent-runs/"+info.RunID)
	httpreply.JSON(w, http.StatusAccepted, info)
}

func serveList(s *runs.Service, w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			httpreply.Error(w, job.Errorf(job.CodeInvalidRequest, "limit must be 1..1000, not %q", v).With("field", "limit"))
			return
		}
		limit = n
	}
	list, err := s.List(limit)
	if err != nil {
		httpreply.Error(w, err)
		return
	}
	httpreply.JSON(w, http.StatusOK, map[string]any{"runs": list})
}

func serveGet(s *runs.Service, w http.ResponseWriter, r *http.Request) {
	run, err := s.Get(r.PathValue("id"))
	if err != nil {
		httpreply.Error(w, err)
		return
	}
	httpreply.JSON(w, http.StatusOK, run)
}

func serveAudit(s *runs.Service, w http.ResponseWriter, r *http.Request) {
	t, err := s.Audit(r.PathValue("id"))
	if err != nil {
		httpreply.Error(w, err)
		return
	}
	httpreply.JSON(w, http.StatusOK, t)
}
