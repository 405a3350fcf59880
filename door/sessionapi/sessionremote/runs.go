package sessionremote

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/job"
)

// runPatterns are the routes whose answer names a run of the sandbox
// (run_id), with the kind of run it must be.
var runPatterns = map[string]string{
	"POST /v1/sandboxes/{id}/exec":      "exec",
	"POST /v1/sandboxes/{id}/processes": "proc",
}

// maxRunAnswerBytes bounds an exec's answer claimRun reads (its stdout
// and stderr are 1 MiB each at most, JSON-escaped).
const maxRunAnswerBytes = 16 << 20

var runNumber = regexp.MustCompile(`^[0-9]{1,18}$`)

// claimRun binds the run an exec or a process start of sandbox id
// answered to the worker that holds the sandbox (RouterConfig.Claim), so
// the worker's record of it reaches this node's store. Only a run id of
// that sandbox and kind (<id>.exec-N, <id>.proc-N) is claimed: a worker
// cannot claim another record's id this way.
func (r *Router) claimRun(ctx context.Context, resp *http.Response, id, kind string, inst instance) error {
	if r.cfg.Claim == nil {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRunAnswerBytes+1))
	resp.Body.Close()
	if err != nil || len(body) > maxRunAnswerBytes {
		return job.Errorf(job.CodeSessionWorkerLost, "the worker's answer could not be read").With("worker", string(inst))
	}
	setResponseBody(resp, body)
	var ans struct {
		RunID string `json:"run_id"`
	}
	if json.Unmarshal(body, &ans) != nil {
		return nil
	}
	n, ok := strings.CutPrefix(ans.RunID, id+"."+kind+"-")
	if !ok || !runNumber.MatchString(n) {
		r.cfg.Logger.Warn("a worker answered a run id not of its sandbox", "worker", string(inst), "id", id, "run_id", ans.RunID)
		return nil
	}
	worker, _, _ := strings.Cut(string(inst), ".")
	// The claim is written even when the caller has gone since.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.cfg.Claim(ctx, worker, ans.RunID); err != nil {
		r.cfg.Logger.Warn("cannot bind a sandbox's run to its worker", "worker", string(inst), "run_id", ans.RunID, "error", err)
	}
	return nil
}
