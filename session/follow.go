package session

import (
	"context"
	"encoding/base64"
	"unicode/utf8"

	"github.com/agent-runner/agent-runner/job"
)

// ProcessEvent is one event of a background process's stream: Type
// "start", "stdout", "stderr", "gap" or "exit"; Offset, the byte offset
// a reader that got it resumes from (the stream's event id); Data its
// payload (OutputEvent, GapEvent or ProcessInfo).
type ProcessEvent struct {
	Type   string
	Offset int64
	Data   any
}

// OutputEvent is a write of the process's output: its bytes start at
// Offset. Data is the bytes as text, or in base64 when they are not
// valid UTF-8 (Base64 true; a write can end inside a character).
type OutputEvent struct {
	Offset int64  `json:"offset"`
	Data   string `json:"data"`
	Base64 bool   `json:"base64,omitempty"`
}

// GapEvent tells a reader that the buffer no longer held bytes From to
// To (MissedBytes of them): it resumed from an offset older than the
// buffer.
type GapEvent struct {
	From        int64 `json:"from"`
	To          int64 `json:"to"`
	MissedBytes int64 `json:"missed_bytes"`
}

// FollowProcess sends process pid's events from byte offset from: start
// (only from offset 0), a gap when the buffer dropped bytes after from,
// every write of its output after from, and once it ended, exit (its
// ProcessInfo); then it returns nil. It returns ctx's end as nil too.
// An offset beyond what the process wrote is validation.invalid_request.
func (s *Service) FollowProcess(ctx context.Context, id string, pid int, from int64, send func(ProcessEvent) error) error {
	pc, err := s.process(id, pid)
	if err != nil {
		return err
	}
	// A follower is a client attached: the sandbox is not idle meanwhile.
	if h := s.handle(id); h != nil {
		defer s.hold(h)()
	}
	if size := pc.out.size(); from < 0 || from > size {
		return job.Errorf(job.CodeInvalidRequest, "offset %d is not within the process's output (0 to %d)", from, size).With("field", "offset").With("size", size)
	}
	if from == 0 {
		if err := send(ProcessEvent{Type: "start", Offset: 0, Data: pc.snapshot()}); err != nil {
			return err
		}
	}
	for {
		r, err := pc.out.next(ctx, from)
		if err != nil {
			return nil
		}
		if r.Missed > 0 {
			from += r.Missed
			if err := send(ProcessEvent{Type: "gap", Offset: from, Data: GapEvent{From: r.From, To: from, MissedBytes: r.Missed}}); err != nil {
				return err
			}
		}
		for _, c := range r.Chunks {
			ev := OutputEvent{Offset: c.Offset, Data: string(c.Data)}
			if !utf8.Valid(c.Data) {
				ev.Data, ev.Base64 = base64.StdEncoding.EncodeToString(c.Data), true
			}
			from = c.End()
			if err := send(ProcessEvent{Type: c.Stream, Offset: from, Data: ev}); err != nil {
				return err
			}
		}
		if r.Done && len(r.Chunks) == 0 && r.Missed == 0 {
			<-pc.done
			return send(ProcessEvent{Type: "exit", Offset: from, Data: pc.snapshot()})
		}
	}
}
