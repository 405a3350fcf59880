// Package capture records one output stream of a job: it keeps at most a
// fixed number of bytes, counts and hashes every byte the process wrote
// (so the SHA-256 covers the complete output, retained or not), and
// forwards each chunk to an optional live subscriber.
package capture

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agent-runner/agent-runner/job"
)

// Stream is a bounded, hashing io.Writer. It is safe for concurrent use.
type Stream struct {
	mu    sync.Mutex
	limit int64
	buf   []byte
	total int64
	h     hash.Hash
	live  func(p []byte)
}

// New returns a Stream that retains at most limit bytes and calls live (if
// non-nil) with every chunk as it arrives.
func New(limit int64, live func(p []byte)) *Stream {
	return &Stream{limit: limit, h: sha256.New(), live: live}
}

// Write never fails, so a chatty process is never blocked or killed by its
// own output; bytes beyond the limit are hashed and counted, then dropped.
func (s *Stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.h.Write(p)
	s.total += int64(len(p))
	if room := s.limit - int64(len(s.buf)); room > 0 {
		keep := p
		if int64(len(keep)) > room {
			keep = keep[:room]
		}
		s.buf = append(s.buf, keep...)
	}
	live := s.live
	s.mu.Unlock()
	if live != nil {
		live(p)
	}
	return len(p), nil
}

// Retained returns a copy of the retained bytes, cut to at most n (n < 0
// keeps everything retained).
func (s *Stream) Retained(n int64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buf
	if n >= 0 && int64(len(b)) > n {
		b = b[:n]
	}
	return append([]byte(nil), b...)
}

// Len is the number of retained bytes.
func (s *Stream) Len() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.buf))
}

// Output renders the stream as a job.Output. Text is always valid UTF-8 (a
// cut multi-byte character at the cap is dropped from Text); when the
// retained bytes are not valid UTF-8, Base64 carries them exactly.
func (s *Stream) Output() job.Output { return s.OutputN(-1) }

// OutputN is Output with the retained bytes cut to at most n (n < 0 keeps
// everything retained). The run store uses it to fit max_run_record_bytes.
func (s *Stream) OutputN(n int64) job.Output {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buf
	if n >= 0 && int64(len(b)) > n {
		b = b[:n]
	}
	out := job.Output{
		Truncated:  s.total > int64(len(b)),
		SHA256:     hex.EncodeToString(s.h.Sum(nil)),
		TotalBytes: s.total,
	}
	text := b
	if out.Truncated {
		text = trimPartialRune(b)
	}
	if utf8.Valid(text) {
		out.Text = string(text)
	} else {
		// Base64 carries every retained byte (what stdout.txt holds), the
		// rune cut at the cap included.
		out.Text = strings.ToValidUTF8(string(text), "\uFFFD")
		out.Base64 = base64.StdEncoding.EncodeToString(b)
	}
	return out
}

// trimPartialRune drops an incomplete UTF-8 sequence cut off at the end.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return b
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}
