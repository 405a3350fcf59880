// Package launch runs agents and keeps their run directories: a scripted
// run walks a task file's steps through the gateway; a Session is the
// shared part (runs/<uuid>/ with audit.jsonl, summary.json, the manifest
// copy, and the one sandbox its subprocess tools run in) that the agent
// loop uses too.
package launch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/agent-runner/agent-runner/agent/audit"
	"github.com/agent-runner/agent-runner/agent/gateway"
	"github.com/agent-runner/agent-runner/agent/manifest"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
)

// Exit reasons recorded in run_end and summary.json.
const (
	ExitCompleted    = "completed"
	ExitFinalAnswer  = "final_answer"
	ExitMaxToolCalls = "max_tool_calls"
	ExitMaxRuntime   = "max_runtime"
	ExitModelError   = "model_error"
	ExitCanceled     = "canceled"
)

// Options configure a Session.
type Options struct {
	// RunsDir holds run directories (default "runs").
	RunsDir string
	// Cwd resolves relative manifest roots and tool paths (default: the
	// process working directory).
	Cwd string
	// Runner is the run service the run's subprocess tools run in, as
	// processes of one sandbox of the run (sandbox.go): serve's. nil
	// builds one of the run's own on <run_dir>/jobs (its records), on
	// the first subprocess tool call, with Egress and AllowHostNetwork;
	// Close closes it.
	Runner *runner.Runner
	// Backend is the backend kind subprocess tools run on (default
	// linux_sandbox; see gateway.WithBackend). When it is unavailable
	// those tools fail with backend.unavailable.
	Backend string
	// Egress and AllowHostNetwork are the operator's network settings for
	// subprocess tools (capabilities.network_hosts, capabilities.network).
	Egress           *egress.Operator
	AllowHostNetwork bool
	Logger           *slog.Logger
	// OnStep, when set, hears each tool call once it is recorded (its
	// audit lines written), in the goroutine that made it.
	OnStep func(StepRecord)
	// Now and NewID are replaceable for golden tests.
	Now   func() time.Time
	NewID func() string
}

// Session is one run: its directory, audit log, policy and gateway.
type Session struct {
	ID       string
	Dir      string
	Mode     string
	Manifest *manifest.Manifest
	Policy   *manifest.Policy
	Audit    *audit.Log
	Gateway  *gateway.Gateway
	Started  time.Time
	now      func() time.Time
	steps    []StepRecord
	onStep   func(StepRecord)
	tools    *toolSandbox
}

// StepRecord is one tool call in summary.json.
type StepRecord struct {
	Call    int64  `json:"call"`
	Tool    string `json:"tool"`
	Allowed bool   `json:"allowed"`
	OK      bool   `json:"ok"`
	Code    string `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// JobStatus is the job's status for subprocess tools.
	JobStatus string `json:"job_status,omitempty"`
}

// Summary is summary.json.
type Summary struct {
	RunID         string       `json:"run_id"`
	RunDir        string       `json:"run_dir"`
	Agent         string       `json:"agent"`
	Mode          string       `json:"mode"`
	StartedAt     time.Time    `json:"started_at"`
	EndedAt       time.Time    `json:"ended_at"`
	ExitReason    string       `json:"exit_reason"`
	ToolCallsUsed int64        `json:"tool_calls_used"`
	MaxToolCalls  int64        `json:"max_tool_calls"`
	Allowed       int          `json:"allowed"`
	Denied        int          `json:"denied"`
	Failed        int          `json:"failed"`
	Steps         []StepRecord `json:"steps"`
	FinalAnswer   string       `json:"final_answer,omitempty"`
	// AuditHeadSHA256 is the hash of audit.jsonl's last line; audit
	// verify compares it so a cut or edited tail is caught.
	AuditHeadSHA256 string `json:"audit_head_sha256"`
}

// Open loads and compiles the manifest, creates runs/<uuid>/, copies the
// manifest there, opens the audit log and writes run_start.
func Open(ctx context.Context, manifestPath, mode string, o Options) (*Session, error) {
	if o.RunsDir == "" {
		o.RunsDir = "runs"
	}
	if o.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, job.Wrap(job.CodeRunIOFailed, err, "working directory")
		}
		o.Cwd = wd
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewID == nil {
		o.NewID = func() string { return uuid.NewString() }
	}
	m, p, raw, err := manifest.LoadPolicy(manifestPath, o.Cwd)
	if err != nil {
		return nil, err
	}
	s := &Session{ID: o.NewID(), Mode: mode, Manifest: m, Policy: p, now: o.Now, Started: o.Now().UTC(), onStep: o.OnStep}
	s.Dir = filepath.Join(o.RunsDir, s.ID)
	// Private to the runner's user, as the store's records are (a
	// capability run under serve is one: store.CapabilityRuns).
	if err := os.MkdirAll(s.Dir, store.PrivateDirMode); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "create run directory").With("path", s.Dir)
	}
	if err := store.WriteFileReplace(filepath.Join(s.Dir, "manifest"+manifestExt(manifestPath)), raw, store.RecordFileMode); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "copy manifest")
	}
	s.Audit, err = audit.Create(filepath.Join(s.Dir, "audit.jsonl"), s.ID)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "create audit log")
	}
	s.Audit.SetClock(o.Now)
	s.tools = &toolSandbox{runID: s.ID, runDir: s.Dir, r: o.Runner, log: o.Logger}
	if s.tools.log == nil {
		s.tools.log = slog.New(slog.DiscardHandler)
	}
	if o.Runner == nil {
		cfg := runner.Config{StoreDir: filepath.Join(s.Dir, "jobs"), Logger: o.Logger, Egress: o.Egress, AllowHostNetwork: o.AllowHostNetwork}
		s.tools.newRunner = func() (*runner.Runner, error) { return runner.New(cfg) }
	}
	s.Gateway = gateway.New(p, s.Audit, s.tools, gateway.WithCwd(o.Cwd), gateway.WithLogger(o.Logger), gateway.WithBackend(o.Backend))
	pol, _ := json.Marshal(p)
	sum := sha256.Sum256(raw)
	if err := s.Audit.Append(audit.Event{Event: audit.EventRunStart, Agent: p.Name, Mode: mode, Manifest: hex.EncodeToString(sum[:]), Policy: pol}); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "write audit")
	}
	return s, nil
}

func manifestExt(path string) string {
	if filepath.Ext(path) == ".json" {
		return ".json"
	}
	return ".yaml"
}

// LimitReached reports whether err from Call means max_tool_calls is used
// up and the run must stop.
func LimitReached(err error) bool { return errors.Is(err, gateway.ErrLimit) }

// Call invokes one tool through the gateway and records the step.
func (s *Session) Call(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
	out, err := s.Gateway.Invoke(ctx, tool, args)
	rec := StepRecord{Call: s.Gateway.CallsUsed(), Tool: tool, Allowed: true, OK: err == nil}
	if err != nil {
		e := job.AsError(err)
		rec.Code, rec.Reason = string(e.Code), e.Message
		rec.Allowed = job.StatusFor(e.Code) != job.StatusPolicyDenied
	}
	var js struct {
		Status string `json:"status"`
	}
	if err == nil && json.Unmarshal(out, &js) == nil {
		rec.JobStatus = js.Status
	}
	s.steps = append(s.steps, rec)
	if s.onStep != nil {
		s.onStep(rec)
	}
	return out, err
}

// Close deletes the run's sandbox, killing whatever its subprocess tools
// left running, and closes a run service of the run's own. Finish calls
// it; a caller defers it too, so that no path (a panic included) leaves
// the sandbox behind. More calls do nothing.
func (s *Session) Close() { s.tools.close() }

// Finish deletes the run's sandbox (Close), writes run_end and
// summary.json and closes the audit log.
func (s *Session) Finish(exitReason, finalAnswer string) (Summary, error) {
	s.Close()
	used := s.Gateway.CallsUsed()
	sum := Summary{
		RunID: s.ID, RunDir: s.Dir, Agent: s.Policy.Name, Mode: s.Mode, StartedAt: s.Started,
		ExitReason: exitReason, ToolCallsUsed: used, MaxToolCalls: s.Policy.Limits.MaxToolCalls,
		Steps: s.steps, FinalAnswer: finalAnswer,
	}
	if sum.Steps == nil {
		sum.Steps = []StepRecord{}
	}
	for _, st := range s.steps {
		switch {
		case !st.Allowed:
			sum.Denied++
		case !st.OK:
			sum.Allowed++
			sum.Failed++
		default:
			sum.Allowed++
		}
	}
	aerr := s.Audit.Append(audit.Event{Event: audit.EventRunEnd, ExitReason: exitReason, ToolCallsUsed: audit.Int(used)})
	if cerr := s.Audit.Close(); aerr == nil {
		aerr = cerr
	}
	sum.AuditHeadSHA256 = s.Audit.Head()
	sum.EndedAt = s.now().UTC()
	b, _ := json.MarshalIndent(sum, "", "  ")
	// summary.json says the run finished: written whole (and durably),
	// or not at all.
	if err := store.WriteFileAtomic(filepath.Join(s.Dir, "summary.json"), append(b, '\n'), store.RecordFileMode); err != nil {
		return sum, job.Wrap(job.CodeRunIOFailed, err, "write summary.json")
	}
	if aerr != nil {
		return sum, job.Wrap(job.CodeRunIOFailed, aerr, "write audit")
	}
	return sum, nil
}
