package egress

import (
	"encoding/json"
	"os"
	"sync"
)

// AuditLog appends Decisions to a JSON-lines file (a job's
// runs/<id>/egress.jsonl, a task's outbox/progress/egress.jsonl). The file
// is created by the first Write, so a run that made no connection has
// none, and kept open until Close. It is safe for concurrent use, as
// Run.Audit requires.
type AuditLog struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// NewAuditLog returns a log that writes to path.
func NewAuditLog(path string) *AuditLog { return &AuditLog{path: path} }

// Write appends one decision as a line.
func (l *AuditLog) Write(d Decision) error {
	line, err := json.Marshal(d)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		if l.f, err = os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
			return err
		}
	}
	_, err = l.f.Write(append(line, '\n'))
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
