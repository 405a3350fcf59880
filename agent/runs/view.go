package runs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agent-runner/agent-runner/agent/audit"
	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// Statuses of a run.
const (
	StatusRunning     = "running"
	StatusFinished    = "finished"    // summary.json is written; exit_reason says how it ended
	StatusInterrupted = "interrupted" // no summary and not in progress: the server stopped mid-run
)

// Info is a run in the list.
type Info struct {
	RunID     string    `json:"run_id"`
	Status    string    `json:"status"`
	Mode      string    `json:"mode"`
	Agent     string    `json:"agent"`
	StartedAt time.Time `json:"started_at"`
	// The counts are those so far while the run is in progress; the
	// rest is known once it finished.
	EndedAt       *time.Time `json:"ended_at,omitempty"`
	ExitReason    string     `json:"exit_reason,omitempty"`
	ToolCallsUsed int64      `json:"tool_calls_used"`
	Allowed       int        `json:"allowed"`
	Denied        int        `json:"denied"`
	Failed        int        `json:"failed"`
}

// Run is one run: its Info, the compiled policy recorded in its audit
// log's run_start, and summary.json once finished.
type Run struct {
	Info
	Policy  json.RawMessage `json:"policy"`
	Summary *launch.Summary `json:"summary,omitempty"`
}

// Trail is a run's audit log with its verification.
type Trail struct {
	RunID  string            `json:"run_id"`
	Status string            `json:"status"`
	Verify audit.Report      `json:"verify"`
	Events []json.RawMessage `json:"events"`
	// Truncated says Events stop before the end of the log (MaxAuditBytes);
	// Verify covers the whole log.
	Truncated bool `json:"truncated,omitempty"`
}

// MaxAuditBytes bounds the events one audit answer carries.
const MaxAuditBytes = 8 << 20

// Get returns run id.
func (s *Service) Get(id string) (Run, error) {
	dir, err := s.dir(id)
	if err != nil {
		return Run{}, err
	}
	start, err := runStart(dir)
	if err != nil {
		return Run{}, err
	}
	run := Run{Info: s.info(id, dir, start), Policy: start.Policy}
	if run.Status == StatusFinished {
		if sum, err := readSummary(dir); err == nil {
			run.Summary = &sum
		}
	}
	return run, nil
}

// List returns up to limit runs, newest first.
func (s *Service) List(limit int) ([]Info, error) {
	ids, err := s.records.List()
	if err != nil {
		return nil, err
	}
	out := []Info{}
	for _, id := range ids {
		dir := s.records.Path(id)
		start, err := runStart(dir)
		if err != nil {
			continue // a directory launch.Open did not finish creating
		}
		out = append(out, s.info(id, dir, start))
	}
	slices.SortFunc(out, func(a, b Info) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return bytes.Compare([]byte(a.RunID), []byte(b.RunID))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Audit returns run id's audit events and the chain's verification. A
// finished run is verified by launch.VerifyRun (the chain, and its last
// line against summary.json); a run in progress up to its last complete
// line.
func (s *Service) Audit(id string) (Trail, error) {
	dir, err := s.dir(id)
	if err != nil {
		return Trail{}, err
	}
	status := s.status(id, dir)
	path := filepath.Join(dir, "audit.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		return Trail{}, job.Wrap(job.CodeRunIOFailed, err, "read audit log")
	}
	t := Trail{RunID: id, Status: status, Events: []json.RawMessage{}}
	if status == StatusRunning {
		b = b[:bytes.LastIndexByte(b, '\n')+1]
		if t.Verify, err = audit.Verify(bytes.NewReader(b)); err != nil {
			return Trail{}, job.Wrap(job.CodeRunIOFailed, err, "verify audit log")
		}
		t.Verify.Path = path
	} else if t.Verify, err = launch.VerifyRun(dir); err != nil {
		return Trail{}, job.Wrap(job.CodeRunIOFailed, err, "verify audit log")
	}
	size := 0
	for line := range bytes.Lines(b) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if size += len(line); size > MaxAuditBytes {
			t.Truncated = true
			break
		}
		if json.Valid(line) {
			t.Events = append(t.Events, json.RawMessage(line))
		}
	}
	return t, nil
}

// info is a run's Info: from memory while it runs, else from its
// summary.json, else (interrupted) from its run_start.
func (s *Service) info(id, dir string, start audit.Event) Info {
	s.mu.Lock()
	a, ok := s.running[id]
	var running Info
	if ok {
		running = a.info
	}
	s.mu.Unlock()
	if ok {
		return running
	}
	in := Info{RunID: id, Status: StatusInterrupted, Mode: apiMode(start.Mode), Agent: start.Agent, StartedAt: start.Time}
	if sum, err := readSummary(dir); err == nil {
		end := sum.EndedAt
		in.Status, in.EndedAt, in.ExitReason = StatusFinished, &end, sum.ExitReason
		in.ToolCallsUsed, in.Allowed, in.Denied, in.Failed = sum.ToolCallsUsed, sum.Allowed, sum.Denied, sum.Failed
	}
	return in
}

func (s *Service) status(id, dir string) string {
	s.mu.Lock()
	_, ok := s.running[id]
	s.mu.Unlock()
	switch {
	case ok:
		return StatusRunning
	case fileExists(filepath.Join(dir, "summary.json")):
		return StatusFinished
	}
	return StatusInterrupted
}

// dir returns run id's directory; an id that is not a run's is
// job.not_found, and never names a path.
func (s *Service) dir(id string) (string, error) {
	if !store.ValidID(id) {
		return "", job.Errorf(job.CodeJobNotFound, "no agent run %q", id).With("run_id", id)
	}
	dir := s.records.Path(id)
	if !fileExists(filepath.Join(dir, "audit.jsonl")) {
		return "", job.Errorf(job.CodeJobNotFound, "no agent run %q", id).With("run_id", id)
	}
	return dir, nil
}

// runStart reads the audit log's first event (run_start, with the
// compiled policy).
func runStart(dir string) (audit.Event, error) {
	f, err := os.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		return audit.Event{}, job.Wrap(job.CodeRunIOFailed, err, "open audit log")
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(io.LimitReader(f, 4<<20), 64<<10).ReadBytes('\n')
	if err != nil {
		return audit.Event{}, job.Wrap(job.CodeRunIOFailed, err, "read run_start")
	}
	var e audit.Event
	if err := json.Unmarshal(line, &e); err != nil || e.Event != audit.EventRunStart {
		return audit.Event{}, job.Errorf(job.CodeRunIOFailed, "audit log does not start with run_start")
	}
	return e, nil
}

func readSummary(dir string) (launch.Summary, error) {
	var sum launch.Summary
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return sum, err
	}
	return sum, json.Unmarshal(b, &sum)
}

// apiMode names a recorded session mode as a launch request does.
func apiMode(recorded string) string {
	switch recorded {
	case launch.ModeScripted:
		return ModeTask
	case modeMock:
		return ModeMock
	}
	return recorded
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, fs.ErrNotExist)
}
