package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agent-runner/agent-runner/door/httpapi"
	"github.com/agent-runner/agent-runner/job"
)

// TestConcurrentIdenticalSubmits: 200 concurrent submits of one job_id
// and request are one job: every answer is 202 or 200 with that id,
// exactly one is 202, and one run directory exists. A different request
// under the id is 409 job.conflict.
func TestConcurrentIdenticalSubmits(t *testing.T) {
	e := newEnv(t, opts{noWorkers: true, capacity: 8})
	req := e.request([]string{"echo", "once"}, "echo")
	req["job_id"] = "job_race-1"
	body, _ := json.Marshal(req)
	const n = 200
	type answer struct {
		code int
		body []byte
		err  error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(e.url+"/v1/jobs", "application/json", bytes.NewReader(body))
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			answers[i].code = resp.StatusCode
			answers[i].body, _ = io.ReadAll(resp.Body)
		}()
	}
	wg.Wait()
	created := 0
	for i, a := range answers {
		var acc httpapi.Accepted
		json.Unmarshal(a.body, &acc)
		if a.err != nil || (a.code != http.StatusAccepted && a.code != http.StatusOK) || acc.JobID != "job_race-1" {
			t.Errorf("submit %d = %d %s (%v), want 202/200 job_race-1", i, a.code, a.body, a.err)
		}
		if a.code == http.StatusAccepted {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d submits created the job, want 1", created)
	}
	runs, _ := os.ReadDir(filepath.Join(e.r.Store().Dir(), "runs"))
	if len(runs) != 1 {
		t.Errorf("runs/ holds %d entries, want 1", len(runs))
	}

	req["command"] = map[string]any{"argv": []string{"echo", "twice"}}
	resp, out := e.post(req)
	if resp.StatusCode != http.StatusConflict || errCode(out) != job.CodeJobConflict {
		t.Errorf("same id, different request = %d %s, want 409 %s", resp.StatusCode, out, job.CodeJobConflict)
	}
}
