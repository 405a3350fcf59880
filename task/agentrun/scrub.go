package agentrun

import (
	"bytes"
	"os"
	"sync"

	"github.com/agent-runner/agent-runner/job"
)

// Redacted replaces secret values in captured output.
const Redacted = "[REDACTED]"

// scrubLog writes output to a progress log after replacing every secret
// value. It works line by line (and in 64 KiB pieces for very long lines),
// so a secret split across two writes is still caught within a line.
type scrubLog struct {
	mu      sync.Mutex
	f       *os.File
	secrets [][]byte
	pending []byte
	emit    func([]byte)
}

func newLog(path string, secrets []string, emit func([]byte)) (*scrubLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot open a progress log")
	}
	l := &scrubLog{f: f, emit: emit}
	for _, s := range secrets {
		if s != "" {
			l.secrets = append(l.secrets, []byte(s))
		}
	}
	return l, nil
}

func (l *scrubLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(l.pending, p...)
	for {
		i := bytes.IndexByte(l.pending, '\n')
		if i < 0 {
			if len(l.pending) > 64<<10 {
				l.out(l.pending)
				l.pending = nil
			}
			return len(p), nil
		}
		l.out(l.pending[:i+1])
		l.pending = l.pending[i+1:]
	}
}

func (l *scrubLog) out(b []byte) {
	for _, s := range l.secrets {
		b = bytes.ReplaceAll(b, s, []byte(Redacted))
	}
	l.f.Write(b)
	if l.emit != nil {
		l.emit(append([]byte(nil), b...))
	}
}

// Flush writes a trailing partial line.
func (l *scrubLog) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) > 0 {
		l.out(l.pending)
		l.pending = nil
	}
}

func (l *scrubLog) Close() error { return l.f.Close() }
