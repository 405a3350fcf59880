// Package audit writes and verifies audit.jsonl: one JSON event per line,
// append-only, each line carrying the sha256 of the previous line's bytes
// (64 zeros for the first line) so an edited, removed or reordered line is
// detectable by Verify.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Event types.
const (
	EventRunStart   = "run_start"
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
	EventRunEnd     = "run_end"
	// EventSandboxCall is one call on a kept sandbox (package session):
	// the operation in Tool, its request in Args, its outcome in OK,
	// Code, Error and Result. A sandbox's log opens with run_start and
	// ends with run_end like a capability run's.
	EventSandboxCall = "sandbox_call"
)

// Genesis is prev_sha256 of the first line.
var Genesis = strings.Repeat("0", 64)

// Event is one audit line. Fields not used by an event type are omitted.
type Event struct {
	Seq   int64     `json:"seq"`
	Time  time.Time `json:"ts"`
	Event string    `json:"event"`
	RunID string    `json:"run_id"`
	// run_start
	Agent    string          `json:"agent,omitempty"`
	Mode     string          `json:"mode,omitempty"`
	Manifest string          `json:"manifest_sha256,omitempty"`
	Policy   json.RawMessage `json:"policy,omitempty"`
	// tool_call / tool_result / sandbox_call
	Call    int64           `json:"call,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	Args    json.RawMessage `json:"args,omitempty"`
	Allowed *bool           `json:"allowed,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	Code    string          `json:"code,omitempty"`
	OK      *bool           `json:"ok,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   string          `json:"error,omitempty"`
	// run_end
	ExitReason    string `json:"exit_reason,omitempty"`
	ToolCallsUsed *int64 `json:"tool_calls_used,omitempty"`

	Prev string `json:"prev_sha256"`
}

// Log appends events to one audit file. It is safe for concurrent use.
type Log struct {
	mu    sync.Mutex
	f     *os.File
	runID string
	seq   int64
	prev  string
	now   func() time.Time
}

// Create creates path (it must not exist) and returns a Log for runID.
func Create(path, runID string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Log{f: f, runID: runID, prev: Genesis, now: time.Now}, nil
}

// SetClock replaces the clock (golden tests).
func (l *Log) SetClock(now func() time.Time) { l.now = now }

// Append writes e with the next sequence number, the time, the run id and
// the previous line's hash, and syncs nothing: the file is closed by Close.
func (l *Log) Append(e Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("audit: log is closed")
	}
	l.seq++
	e.Seq = l.seq
	e.Time = l.now().UTC()
	e.RunID = l.runID
	e.Prev = l.prev
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: encode %s: %w", e.Event, err)
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("audit: write: %w", err)
	}
	l.prev = LineSHA256(line)
	return nil
}

// Close syncs and closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Sync()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// LineSHA256 is the chain hash of one line (without its newline).
func LineSHA256(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// Bool returns a pointer to b (for Allowed/OK).
func Bool(b bool) *bool { return &b }

// Int returns a pointer to n.
func Int(n int64) *int64 { return &n }

// Head is the sha256 of the last line written (Genesis before any).
func (l *Log) Head() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.prev
}
