package egress

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// DefaultMaxAuditBytes is the byte cap of an AuditLog made by NewAuditLog.
const DefaultMaxAuditBytes = 8 << 20

// markReserve is the room kept under the cap for the ModeTruncated mark.
const markReserve = 512

// AuditLog appends Decisions to a JSON-lines file (a job's
// runs/<id>/egress.jsonl, a task's outbox/progress/egress.jsonl), up to a
// byte cap. The file is created by the first Write, so a run that made no
// connection has none, and kept open until Close. The first decision that
// would take the file past its cap (less room for the mark) is dropped,
// and a last line, a ModeTruncated Decision, says so; later decisions are
// dropped too. It is safe for concurrent use, as Run.Audit requires.
type AuditLog struct {
	path     string
	maxBytes int64

	mu        sync.Mutex
	f         *os.File
	size      int64 // of the file: what it held when opened and what was written since
	truncated bool
}

// NewAuditLog returns a log that writes to path, capped at
// DefaultMaxAuditBytes.
func NewAuditLog(path string) *AuditLog { return NewAuditLogMax(path, DefaultMaxAuditBytes) }

// NewAuditLogMax returns a log that writes to path, capped at maxBytes
// (the file's whole size, a part left by an earlier writer included; 0 or
// less: DefaultMaxAuditBytes).
func NewAuditLogMax(path string, maxBytes int64) *AuditLog {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxAuditBytes
	}
	return &AuditLog{path: path, maxBytes: maxBytes}
}

// Write appends one decision as a line. A decision past the cap is
// dropped without an error: the mark already says that some were.
func (l *AuditLog) Write(d Decision) error {
	line, err := json.Marshal(d)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.truncated {
		return nil
	}
	if l.f == nil {
		if l.f, err = os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
			return err
		}
		fi, err := l.f.Stat()
		if err != nil {
			return err
		}
		l.size = fi.Size()
	}
	if l.size+int64(len(line)) > l.maxBytes-markReserve {
		l.truncated = true
		mark, err := json.Marshal(Decision{Time: time.Now().UTC(), Run: d.Run, Mode: ModeTruncated, Rule: RuleTruncated,
			Error: fmt.Sprintf("the audit log reached its cap of %d bytes; later decisions are not recorded here", l.maxBytes)})
		if err != nil || l.size+int64(len(mark))+1 > l.maxBytes {
			return err
		}
		line = append(mark, '\n')
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	return err
}

// Close closes the file, if one was opened.
func (l *AuditLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
