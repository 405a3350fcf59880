package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/agent-runner/agent-runner/agent/audit"
	"github.com/agent-runner/agent-runner/job"
)

// AuditFile is a sandbox's audit log in its record's directory
// (<store>/sessions/<id>/audit.jsonl), written with package audit:
// hash-chained, append-only. It opens with run_start (the create), has
// one sandbox_call line per call that acts on the sandbox, and ends with
// run_end (its end), written before the sandbox is answered ended.
const AuditFile = "audit.jsonl"

// The tools of a sandbox's sandbox_call lines.
const (
	AuditExec          = "exec"
	AuditProcessStart  = "process_start"
	AuditProcessKill   = "process_kill"
	AuditProcessSignal = "process_signal"
	AuditWriteFile     = "write_file"
	AuditRemoveFile    = "remove_file"
	AuditMoveFile      = "move_file"
	AuditMakeDir       = "make_dir"
	AuditPause         = "pause"
	AuditResume        = "resume"
	AuditSetTimeout    = "set_timeout"
)

// auditLog is one live sandbox's audit log. After a line could not be
// written it is broken: every later call on the sandbox is refused
// (run.io_failed) before it acts, so nothing acts unrecorded but the
// one call whose line failed. Once closed (the sandbox ended) calls are
// not recorded (they answer session.not_running anyway). A nil log
// records nothing.
type auditLog struct {
	mu     sync.Mutex
	log    *audit.Log
	broken error
	closed bool
}

// openAudit creates sandbox id's audit log.
func (s *Service) openAudit(id string) (*auditLog, error) {
	l, err := audit.Create(filepath.Join(s.cfg.Records.Path(id), AuditFile), id)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create the sandbox's audit log").With("id", id)
	}
	return &auditLog{log: l}, nil
}

// ready is the error a call must answer before it acts: run.io_failed
// once a line could not be written.
func (a *auditLog) ready() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.broken
}

// append writes e: run.io_failed when it cannot (and from then on).
func (a *auditLog) append(e audit.Event) error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed:
		return nil
	case a.broken != nil:
		return a.broken
	}
	if err := a.log.Append(e); err != nil {
		a.broken = job.Wrap(job.CodeRunIOFailed, err, "cannot write the sandbox's audit log")
		return a.broken
	}
	return nil
}

// close writes the last line e (when it can) and closes the log.
func (a *auditLog) close(e audit.Event) error {
	err := a.append(e)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return err
	}
	a.closed = true
	return errors.Join(err, a.log.Close())
}

// call is one sandbox_call line in the making: the operation does its
// work and may fill result (what it did: a run id, a pid) and refused (a
// refusal it answers as a result, an exec's policy denial).
type call struct {
	tool    string
	args    map[string]any
	result  any
	refused *job.Error
}

// audited runs do, a call on sandbox id, and records it: refused before
// it acts when the sandbox's log is broken, then one line with its
// outcome. A call on a sandbox that is not live (unknown, ended) is not
// recorded. A line that cannot be written fails the call (run.io_failed)
// when it succeeded; a call that failed answers its own error.
func (s *Service) audited(id string, c *call, do func() error) error {
	h := s.handle(id)
	if h != nil {
		if err := h.audit.ready(); err != nil {
			return err
		}
	}
	err := do()
	if h == nil {
		return err
	}
	e := audit.Event{Event: audit.EventSandboxCall, Tool: c.tool, OK: audit.Bool(err == nil && c.refused == nil)}
	if len(c.args) > 0 {
		e.Args = encodeJSON(c.args)
	}
	if c.result != nil {
		e.Result = encodeJSON(c.result)
	}
	cause := c.refused
	if err != nil {
		cause = job.AsError(err)
	}
	if cause != nil {
		e.Code, e.Error = string(cause.Code), cause.Message
	}
	if aerr := h.audit.append(e); aerr != nil {
		if err == nil {
			err = aerr
		}
		s.cfg.Logger.Warn("cannot record a sandbox call", "id", id, "tool", c.tool, "error", aerr)
	}
	return err
}

// auditCreate writes sandbox rec's run_start line: who created it (by,
// the door's token name) and how, or why it could not be built.
func auditCreate(a *auditLog, rec Record, by string, cause error) error {
	args := map[string]any{"backend": rec.Backend, "state": rec.State, "start": rec.Start}
	putIf(args, "by", by)
	putIf(args, "template", rec.Template)
	putIf(args, "start_reason", rec.StartReason)
	e := audit.Event{Event: audit.EventRunStart, Args: encodeJSON(args), OK: audit.Bool(cause == nil)}
	if rec.Policy != nil {
		e.Policy = encodeJSON(rec.Policy)
	}
	if cause != nil {
		jerr := job.AsError(cause)
		e.Code, e.Error = string(jerr.Code), jerr.Message
	}
	return a.append(e)
}

// endAudit writes ended sandbox rec's run_end line (by: who deleted
// it) and closes its log; a failure is logged (the sandbox ends all the
// same).
func (s *Service) endAudit(a *auditLog, rec Record, by string) {
	if a == nil {
		return
	}
	args := map[string]any{"state": rec.State}
	putIf(args, "by", by)
	putIf(args, "reason", rec.EndReason)
	e := audit.Event{Event: audit.EventRunEnd, ExitReason: string(rec.State), Args: encodeJSON(args)}
	if rec.Error != nil {
		e.Code, e.Error = string(rec.Error.Code), rec.Error.Message
	}
	if err := a.close(e); err != nil {
		s.cfg.Logger.Warn("cannot record a sandbox's end in its audit log", "id", rec.ID, "error", err)
	}
}

// AuditLog returns sandbox id's audit log, live or ended while its
// record is kept, up to its last whole line: job.not_found when there
// is no sandbox or it has no log (created before logs were kept).
func (s *Service) AuditLog(id string) ([]byte, error) {
	if !s.cfg.Records.Exists(id) {
		return nil, job.Errorf(job.CodeJobNotFound, "no sandbox %q", id).With("id", id)
	}
	b, err := os.ReadFile(filepath.Join(s.cfg.Records.Path(id), AuditFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, job.Errorf(job.CodeJobNotFound, "sandbox %q has no audit log", id).With("id", id)
	case err != nil:
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot read the sandbox's audit log").With("id", id)
	}
	// A line being appended is left out until it is whole.
	return b[:bytes.LastIndexByte(b, '\n')+1], nil
}

// envKeys are env's names, sorted: an audit line never holds a value.
func envKeys(env map[string]string) []string {
	if len(env) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(env))
}

// sha256Hex is the hex sha256 of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func putIf(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// encodeJSON is v as JSON (values of this package always encode).
func encodeJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"encode_error": err.Error()})
	}
	return b
}
