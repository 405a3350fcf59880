package ui

import (
	"net/http"

	"github.com/agent-runner/agent-runner/door/httpreply"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// withheld replaces every command.env value of a job's request shown on
// the job page: a read token sees which variables were set, never their
// values (they may hold credentials).
const withheld = "(withheld)"

// jobRequest serves GET /ui-api/jobs/{job_id}/request: the normalized
// request the job was accepted with (request.json), its environment
// values withheld. The HTTP API serves only the result, which a running
// job does not have yet.
func jobRequest(st *store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("job_id")
		req, err := st.ReadRequest(id)
		if err != nil {
			httpreply.Error(w, job.Errorf(job.CodeJobNotFound, "job not found").With("job_id", id))
			return
		}
		httpreply.JSON(w, http.StatusOK, redact(req))
	})
}

func redact(req job.Request) job.Request {
	if len(req.Command.Env) > 0 {
		env := make(map[string]string, len(req.Command.Env))
		for k := range req.Command.Env {
			env[k] = withheld
		}
		req.Command.Env = env
	}
	return req
}
