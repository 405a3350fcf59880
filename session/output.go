package session

import (
	"context"
	"sync"
)

// OutputBufferBytes is how much of a background process's output its
// buffer keeps: the newest bytes of stdout and stderr together, in the
// order the process wrote them. Offsets count every byte the process
// wrote since it started, so a reader that resumes from an offset the
// buffer dropped learns how many bytes it missed.
const OutputBufferBytes = 2 << 20

// Chunk is one write of a process's output: Stream ("stdout" or
// "stderr"), its bytes, and Offset, where they start in the process's
// output.
type Chunk struct {
	Stream string
	Offset int64
	Data   []byte
}

// End is the offset just after c, where a reader that has c resumes.
func (c Chunk) End() int64 { return c.Offset + int64(len(c.Data)) }

// output is a process's output buffer: the newest chunks up to limit
// bytes, the total written, and a channel closed at each change.
type output struct {
	mu     sync.Mutex
	limit  int
	chunks []Chunk
	held   int
	total  int64
	closed bool
	change chan struct{}
}

func newOutput(limit int) *output {
	return &output{limit: limit, change: make(chan struct{})}
}

// add appends p to the buffer as stream's, dropping the oldest chunks
// beyond the limit.
func (o *output) add(stream string, p []byte) {
	if len(p) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	data := append([]byte(nil), p...)
	if len(data) > o.limit {
		// Only the newest limit bytes of one large write are kept.
		cut := len(data) - o.limit
		o.total += int64(cut)
		data = data[cut:]
	}
	o.chunks = append(o.chunks, Chunk{Stream: stream, Offset: o.total, Data: data})
	o.total += int64(len(data))
	o.held += len(data)
	for o.held > o.limit {
		o.held -= len(o.chunks[0].Data)
		o.chunks = o.chunks[1:]
	}
	o.notify()
}

// close marks the output complete: the process ended.
func (o *output) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.notify()
}

func (o *output) notify() {
	close(o.change)
	o.change = make(chan struct{})
}

// since returns the chunks that end after from, the first offset the
// buffer still holds (total when it holds nothing), whether the output
// is complete, and a channel closed at the next change.
func (o *output) since(from int64) (chunks []Chunk, first int64, done bool, change <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	first = o.total
	if len(o.chunks) > 0 {
		first = o.chunks[0].Offset
	}
	for _, c := range o.chunks {
		if c.End() > from {
			chunks = append(chunks, c)
		}
	}
	return chunks, first, o.closed, o.change
}

// size is the offset just after the last byte written.
func (o *output) size() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

// streamWriter writes to o as one stream; the backend's copying
// goroutine calls it.
type streamWriter struct {
	o      *output
	stream string
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.o.add(w.stream, p)
	return len(p), nil
}

// Read is what a reader of a process's output gets next after offset
// from: a gap when the buffer no longer holds bytes from there (Missed
// bytes, From to From+Missed), the chunks after it, and Done once the
// process ended and nothing more will come.
type Read struct {
	Missed int64
	From   int64
	Chunks []Chunk
	Done   bool
}

// next waits until o has something after from (or is complete), or ctx
// ends, and returns it. A chunk that starts before from (a reader that
// resumes inside it) is cut to start at from.
func (o *output) next(ctx context.Context, from int64) (Read, error) {
	for {
		chunks, first, done, change := o.since(from)
		r := Read{From: from, Done: done}
		if from < first {
			r.Missed = first - from
		}
		for _, c := range chunks {
			if c.Offset < from {
				c.Data = c.Data[from-c.Offset:]
				c.Offset = from
			}
			r.Chunks = append(r.Chunks, c)
		}
		if r.Missed > 0 || len(r.Chunks) > 0 || done {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return Read{}, ctx.Err()
		case <-change:
		}
	}
}
