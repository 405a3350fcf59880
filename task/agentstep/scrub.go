package agentstep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/agent-runner/agent-runner/job"
)

// Redacted replaces secret values in captured output.
const Redacted = "[REDACTED]"

// maxPiece is how long a line may grow before scrubLog writes it out in
// pieces.
const maxPiece = 64 << 10

// scrubber finds secret values in bytes: each value as it is, and as a
// JSON string carries it (stream-json quotes what a tool printed, so a
// value with a newline or a quote appears escaped).
type scrubber struct {
	secrets [][]byte
	maxLen  int
}

func newScrubber(values []string) *scrubber {
	s := &scrubber{}
	for _, v := range values {
		for _, form := range jsonForms(v) {
			if form != "" && !slices.ContainsFunc(s.secrets, func(b []byte) bool { return string(b) == form }) {
				s.secrets = append(s.secrets, []byte(form))
				s.maxLen = max(s.maxLen, len(form))
			}
		}
	}
	return s
}

// jsonForms is v and v inside a JSON string, as Go (with and without HTML
// escaping) and JavaScript's JSON.stringify write it.
func jsonForms(v string) []string {
	forms := []string{v}
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) == nil {
			forms = append(forms, string(bytes.TrimSuffix(bytes.TrimSpace(b.Bytes()), []byte(`"`))[1:]))
		}
	}
	return forms
}

// span is a half-open byte range of a buffer.
type span struct{ start, end int }

// matches returns the union of every occurrence of a secret in p, sorted;
// overlapping occurrences are merged into one span.
func (s *scrubber) matches(p []byte) []span {
	var all []span
	for _, sec := range s.secrets {
		for off := 0; ; {
			i := bytes.Index(p[off:], sec)
			if i < 0 {
				break
			}
			all = append(all, span{off + i, off + i + len(sec)})
			off += i + 1
		}
	}
	slices.SortFunc(all, func(a, b span) int { return a.start - b.start })
	var merged []span
	for _, m := range all {
		if n := len(merged); n > 0 && m.start <= merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, m.end)
			continue
		}
		merged = append(merged, m)
	}
	return merged
}

// holdback is the earliest k where p[k:] is the beginning of a secret but
// not all of it: a later write may complete the secret there. len(p) when
// no secret can start in p's tail.
func (s *scrubber) holdback(p []byte) int {
	k := len(p)
	for _, sec := range s.secrets {
		for i := max(0, len(p)-len(sec)+1); i < k; i++ {
			if bytes.HasPrefix(sec, p[i:]) {
				k = i
				break
			}
		}
	}
	return k
}

// redact writes p with each span replaced by Redacted.
func redact(p []byte, spans []span) []byte {
	out := make([]byte, 0, len(p))
	prev := 0
	for _, m := range spans {
		out = append(append(out, p[prev:m.start]...), Redacted...)
		prev = m.end
	}
	return append(out, p[prev:]...)
}

// String scrubs a complete string (a tool name, an error line).
func (s *scrubber) String(v string) string {
	return string(redact([]byte(v), s.matches([]byte(v))))
}

// scrubLog writes output to a progress log and to emit after replacing
// every secret value, whatever the write boundaries: output leaves in
// whole lines (a line over 64 KiB in pieces), and bytes that may be the
// beginning of a secret (a piece's tail, a line's end when a value spans
// lines) wait for the writes that decide it. Flush writes the rest.
type scrubLog struct {
	mu      sync.Mutex
	f       *os.File
	s       *scrubber
	pending []byte
	emit    func([]byte)
	// limit caps the file; written counts what it holds; truncated says
	// the truncation line is written (nothing more goes to the file).
	limit, written int64
	truncated      bool
	// err is the first write to the file that failed (Close returns it).
	err error
}

func newLog(path string, s *scrubber, limit int64, emit func([]byte)) (*scrubLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot open a progress log")
	}
	l := &scrubLog{f: f, s: s, emit: emit, limit: limit}
	if fi, err := f.Stat(); err == nil {
		l.written = fi.Size()
	}
	return l, nil
}

// setEmit makes emit where scrubbed output goes on.
func (l *scrubLog) setEmit(emit func([]byte)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.emit = emit
}

// store appends b to the file up to the limit; the first write that does
// not fit ends the file with one truncation line.
func (l *scrubLog) store(b []byte) {
	if l.truncated {
		return
	}
	if room := max(0, l.limit-l.written); int64(len(b)) > room {
		b = append(b[:room:room], fmt.Sprintf("\n[agent-runner: log truncated at %d bytes; live viewers got the rest]\n", l.limit)...)
		l.truncated = true
	}
	l.written += int64(len(b))
	if _, err := l.f.Write(b); err != nil && l.err == nil {
		l.err = err
	}
}

// Write never fails: the output still reaches live subscribers, and a
// write the file refused is reported by Close.
func (l *scrubLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(l.pending, p...)
	if bytes.IndexByte(p, '\n') >= 0 || len(l.pending) > maxPiece {
		l.drain(false)
	}
	return len(p), nil
}

// drain writes out what is decided: complete lines before any possible
// start of a secret (final: everything, the stream has ended).
func (l *scrubLog) drain(final bool) {
	buf := l.pending
	spans := l.s.matches(buf)
	cut := len(buf)
	if !final {
		h := l.s.holdback(buf)
		cut = bytes.LastIndexByte(buf[:h], '\n') + 1
		if cut == 0 && len(buf) > maxPiece {
			cut = h
		}
		// Never split a redacted span: its bytes are all here.
		for _, m := range spans {
			if m.start < cut && cut < m.end {
				cut = m.end
			}
		}
	}
	if cut == 0 {
		return
	}
	var done []span
	for _, m := range spans {
		if m.end <= cut {
			done = append(done, m)
		}
	}
	b := redact(buf[:cut], done)
	l.pending = append(buf[:0], buf[cut:]...)
	l.store(b)
	if l.emit != nil {
		l.emit(b)
	}
}

// Flush writes a trailing partial line.
func (l *scrubLog) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) > 0 {
		l.drain(true)
	}
}

// Close closes the file. Its error also reports the first write that
// failed: the log is incomplete.
func (l *scrubLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.err, l.f.Close())
}
