package agentstep

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/backend"
)

// HeartbeatFile is outbox/progress/metrics.jsonl: one Heartbeat per line.
const HeartbeatFile = "metrics.jsonl"

// Heartbeat is one periodic report of a running agent: its progress and,
// on backends that measure it (linux_sandbox's cgroups), CPU and memory.
type Heartbeat struct {
	Time            time.Time `json:"time"`
	TaskID          string    `json:"task_id"`
	CPUSeconds      *float64  `json:"cpu_seconds,omitempty"`
	MemoryBytes     *int64    `json:"memory_bytes,omitempty"`
	PeakMemoryBytes *int64    `json:"peak_memory_bytes,omitempty"`
	Processes       *int64    `json:"processes,omitempty"`
	Progress        Progress  `json:"progress"`
}

// heartbeats keeps the latest usage sample and appends heartbeats.
type heartbeats struct {
	path   string
	taskID string
	prog   *tracker
	// log hears the first heartbeat that cannot be written; failed says
	// it has (beat runs on one goroutine).
	log    *slog.Logger
	failed bool
	// emit, when set, also gets each heartbeat line (with its newline).
	emit func([]byte)

	mu    sync.Mutex
	usage *backend.Usage
}

func (h *heartbeats) sample(u backend.Usage) {
	h.mu.Lock()
	h.usage = &u
	h.mu.Unlock()
}

// beat appends one heartbeat line.
func (h *heartbeats) beat() {
	hb := Heartbeat{Time: time.Now().UTC(), TaskID: h.taskID, Progress: h.prog.snapshot()}
	h.mu.Lock()
	if u := h.usage; u != nil {
		cpu := u.CPUTime.Seconds()
		hb.CPUSeconds, hb.MemoryBytes, hb.PeakMemoryBytes, hb.Processes = &cpu, &u.MemoryBytes, &u.PeakMemoryBytes, &u.Processes
	}
	h.mu.Unlock()
	line, _ := json.Marshal(hb) // plain data: always encodes
	// Heartbeats are best effort: the run goes on without them, and the
	// operator hears of the first one lost.
	if err := appendLine(h.path, line); err != nil && !h.failed {
		h.failed = true
		h.log.Warn("cannot record a heartbeat; later failures of this run are not logged", "file", HeartbeatFile, "error", err)
	}
	if h.emit != nil {
		h.emit(append(line, '\n'))
	}
}

func appendLine(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	return errors.Join(err, f.Close())
}

// run beats every interval until done is closed, and once more at the end.
func (h *heartbeats) run(every time.Duration, done <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			h.beat()
			return
		case <-t.C:
			h.beat()
		}
	}
}

// heartbeatTail is how much of metrics.jsonl LastHeartbeat reads: the
// file grows all run long, a heartbeat line is a few hundred bytes.
const heartbeatTail = 16 << 10

// LastHeartbeat reads the last complete line of a task's metrics.jsonl,
// reading only the file's tail.
func LastHeartbeat(progressDir string) (*Heartbeat, bool) {
	f, err := os.Open(filepath.Join(progressDir, HeartbeatFile))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false
	}
	off := max(fi.Size()-heartbeatTail, 0)
	b := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(b, off) // io.EOF if it shrank; what was read is searched
	b = b[:n]
	for len(b) > 0 {
		b = bytes.TrimRight(b, "\n")
		line := b[bytes.LastIndexByte(b, '\n')+1:]
		var hb Heartbeat
		if json.Unmarshal(line, &hb) == nil && !hb.Time.IsZero() {
			return &hb, true
		}
		b = b[:len(b)-len(line)]
	}
	return nil, false
}
