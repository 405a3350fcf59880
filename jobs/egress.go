package jobs

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
)

// MaxEgressDecisions bounds the decisions one Egress answer carries.
const MaxEgressDecisions = 10000

// EgressLog is a job's recorded egress decisions.
type EgressLog struct {
	JobID     string            `json:"job_id"`
	Decisions []egress.Decision `json:"decisions"`
	// Truncated says Decisions stop at MaxEgressDecisions; the log holds
	// more.
	Truncated bool `json:"truncated,omitempty"`
}

// Egress returns the egress gateway's decisions recorded in job id's run
// record (egress.jsonl, one per connection of a job with policy.network
// "allowlist"), in the order they were made: all of a finished job's,
// those so far of a running one (complete lines only), none for a job
// that made no connection. They are what the job's stream sent live as
// "egress" events, kept after those expire.
func (s *Service) Egress(id string) (EgressLog, error) {
	if err := s.Exists(id); err != nil {
		return EgressLog{}, err
	}
	out := EgressLog{JobID: id, Decisions: []egress.Decision{}}
	f, err := os.Open(filepath.Join(s.Store().RunDir(id), runner.EgressFile))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return EgressLog{}, job.Wrap(job.CodeRunIOFailed, err, "cannot read the job's egress log").With("job_id", id)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			// A last line without its newline is still being written.
			return out, nil
		}
		if err != nil {
			return EgressLog{}, job.Wrap(job.CodeRunIOFailed, err, "cannot read the job's egress log").With("job_id", id)
		}
		if len(out.Decisions) == MaxEgressDecisions {
			out.Truncated = true
			return out, nil
		}
		var d egress.Decision
		if err := json.Unmarshal(line, &d); err != nil {
			return EgressLog{}, job.Wrap(job.CodeRunIOFailed, err, "the job's egress log is not JSON lines").With("job_id", id).With("line", n)
		}
		out.Decisions = append(out.Decisions, d)
	}
}
