package agentstep

import (
	"bytes"
	"sync"
	"unicode/utf8"
)

// MaxFailureBytes bounds Outcome.Failure.
const MaxFailureBytes = 500

// errorLine remembers the last line of the agent's stderr that reads as an
// error ("error", "fatal", "panic"), and the last line of any kind. It
// sees the raw stream; failure scrubs what it returns.
type errorLine struct {
	mu      sync.Mutex
	cur     []byte
	curCut  bool
	last    line
	lastErr line
}

type line struct {
	text []byte
	cut  bool // longer than kept
}

// keep is how much of a line errorLine holds: enough for MaxFailureBytes
// after scrubbing shortens it.
const keep = 4 * MaxFailureBytes

func (e *errorLine) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		room := keep - len(e.cur)
		if len(chunk) > room {
			chunk, e.curCut = chunk[:room], true
		}
		e.cur = append(e.cur, chunk...)
		if i < 0 {
			break
		}
		e.end()
		p = p[i+1:]
	}
	return n, nil
}

// end closes the current line.
func (e *errorLine) end() {
	text := bytes.TrimSpace(e.cur)
	if len(text) > 0 {
		l := line{text: bytes.Clone(text), cut: e.curCut}
		e.last = l
		lower := bytes.ToLower(text)
		if bytes.Contains(lower, []byte("error")) || bytes.Contains(lower, []byte("fatal")) || bytes.Contains(lower, []byte("panic")) {
			e.lastErr = l
		}
	}
	e.cur, e.curCut = e.cur[:0], false
}

// failure is the last error line (else the last line), scrubbed and
// bounded; "" when stderr was empty.
func (e *errorLine) failure(s *scrubber) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.end()
	l := e.lastErr
	if l.text == nil {
		l = e.last
	}
	return excerpt(s, l.text, l.cut)
}

// excerpt scrubs raw and bounds it to MaxFailureBytes. When raw was cut
// from a longer line, a secret's beginning at its end goes too.
func excerpt(s *scrubber, raw []byte, cut bool) string {
	b := redact(raw, s.matches(raw))
	if cut {
		b = b[:s.holdback(b)]
	}
	if len(b) <= MaxFailureBytes {
		return string(b)
	}
	b = b[:MaxFailureBytes]
	for range utf8.UTFMax - 1 {
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1] // a rune cut in two
	}
	return string(b) + "…"
}
