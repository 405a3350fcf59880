package taskapi

import (
	"bytes"
	"errors"
	"io"
	"os"
)

// chunkBytes is the most a viewer reads of a log at once: what one viewer
// of a stream holds in serve's memory, whatever the log's size.
const chunkBytes = 64 << 10

// tail reads one of a task's record files (a log, events.jsonl,
// metrics.jsonl) from its own offset, a bounded chunk of complete lines
// at a time. Each viewer of a stream has its own tails, so a viewer
// reads the record at the pace its connection accepts what it sends
// (backpressure), and serve never holds a viewer's backlog.
type tail struct {
	path string
	f    *os.File
	off  int64
	buf  []byte
}

func newTail(path string) *tail { return &tail{path: path} }

// next returns the next chunk of complete lines (each ending "\n"), at
// most chunkBytes; a line longer than that comes in pieces of
// chunkBytes. With final (the writer is done) an unterminated last line
// comes too. The chunk is valid until the next call; nil means nothing
// new (or the file does not exist yet). The chunk starts at the offset
// the tail had before the call.
func (t *tail) next(final bool) []byte {
	if t.f == nil {
		f, err := os.Open(t.path)
		if err != nil {
			return nil
		}
		t.f = f
		t.buf = make([]byte, chunkBytes)
	}
	n, err := t.f.ReadAt(t.buf, t.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil
	}
	b := t.buf[:n]
	switch i := bytes.LastIndexByte(b, '\n'); {
	case i >= 0:
		b = b[:i+1]
	case n == len(t.buf) || final:
	default:
		return nil // an incomplete last line waits for the rest
	}
	t.off += int64(len(b))
	if len(b) == 0 {
		return nil
	}
	return b
}

// close releases the file.
func (t *tail) close() {
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
}

// eachLineWithEnd calls fn with each line of chunk, without its "\n",
// and the bytes it took of the chunk (its "\n" included).
func eachLineWithEnd(chunk []byte, fn func(line []byte, consumed int) error) error {
	for len(chunk) > 0 {
		line, rest, found := bytes.Cut(chunk, []byte{'\n'})
		n := len(line)
		if found {
			n++
		}
		if err := fn(line, n); err != nil {
			return err
		}
		chunk = rest
	}
	return nil
}
