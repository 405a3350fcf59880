package taskapi

import (
	"encoding/json"
	"path/filepath"

	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/state"
)

// recordTails are one viewer's readers of a task's records
// (outbox/progress): events.jsonl, stdout.log, stderr.log and the
// heartbeats, each from the viewer's position.
type recordTails struct {
	ev, hb *tail
	logs   [2]*tail // stdout, stderr
	// skipBeats are the messages of the first heartbeat line read that
	// the viewer was sent already (position.beatSent).
	skipBeats int
}

var logStreams = [2]string{"stdout", "stderr"}

func newRecordTails(progress string, from position) *recordTails {
	rt := &recordTails{
		ev:        newTail(filepath.Join(progress, "events.jsonl")),
		hb:        newTail(filepath.Join(progress, agentstep.HeartbeatFile)),
		logs:      [2]*tail{newTail(filepath.Join(progress, "stdout.log")), newTail(filepath.Join(progress, "stderr.log"))},
		skipBeats: from.beatSent,
	}
	rt.ev.off, rt.logs[0].off, rt.logs[1].off, rt.hb.off = from.events, from.stdout, from.stderr, from.beats
	return rt
}

func (rt *recordTails) close() {
	rt.ev.close()
	rt.hb.close()
	rt.logs[0].close()
	rt.logs[1].close()
}

// events calls fn with each new event of events.jsonl and the offset
// just after its line.
func (rt *recordTails) events(final bool, fn func(m StreamMessage, end int64) error) error {
	for chunk := rt.ev.next(final); chunk != nil; chunk = rt.ev.next(final) {
		end := rt.ev.off - int64(len(chunk))
		err := eachLineWithEnd(chunk, func(line []byte, n int) error {
			end += int64(n)
			var ev state.Event
			if json.Unmarshal(line, &ev) != nil {
				return nil
			}
			typ := ev.Type
			if typ == "" {
				typ = "state_change"
			}
			return fn(StreamMessage{Type: typ, Time: ev.Time, From: ev.From, To: ev.To, Reason: ev.Reason}, end)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// output calls fn with each new chunk of the logs (stream 0 stdout, 1
// stderr) and the offset just after it, a chunk of stdout and one of
// stderr in turn, until both are read to their end (with final, an
// unterminated last line included).
func (rt *recordTails) output(final bool, fn func(stream int, chunk []byte, end int64) error) error {
	for {
		more := false
		for i, t := range rt.logs {
			if chunk := t.next(final); chunk != nil {
				more = true
				if err := fn(i, chunk, t.off); err != nil {
					return err
				}
			}
		}
		if !more {
			return nil
		}
	}
}

// heartbeats calls fn with a progress message, and a metrics one when it
// has CPU or memory, for each new heartbeat, with the position each
// leaves the viewer at: the line's start and the messages of it sent,
// or, after its last message, the line's end and none.
func (rt *recordTails) heartbeats(final bool, fn func(m StreamMessage, beats int64, sent int) error) error {
	for chunk := rt.hb.next(final); chunk != nil; chunk = rt.hb.next(final) {
		start := rt.hb.off - int64(len(chunk))
		err := eachLineWithEnd(chunk, func(line []byte, n int) error {
			lineStart := start
			start += int64(n)
			msgs := beatMessages(line)
			for i, m := range msgs {
				if rt.skipBeats > 0 {
					rt.skipBeats--
					continue
				}
				beats, sent := lineStart, i+1
				if i == len(msgs)-1 {
					beats, sent = start, 0
				}
				if err := fn(m, beats, sent); err != nil {
					return err
				}
			}
			rt.skipBeats = 0
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// beatMessages are the messages of one heartbeat line: progress, and
// metrics when it has CPU or memory (none for a line that is not one).
func beatMessages(line []byte) []StreamMessage {
	var hb agentstep.Heartbeat
	if json.Unmarshal(line, &hb) != nil {
		return nil
	}
	p := hb.Progress
	msgs := []StreamMessage{{Type: "progress", Time: hb.Time, Progress: &p}}
	if hb.MemoryBytes != nil || hb.CPUSeconds != nil {
		msgs = append(msgs, StreamMessage{Type: "metrics", Time: hb.Time, CPUSeconds: hb.CPUSeconds,
			MemoryBytes: hb.MemoryBytes, PeakMemoryBytes: hb.PeakMemoryBytes, Processes: hb.Processes})
	}
	return msgs
}
