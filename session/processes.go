package session

import (
	"context"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// MaxEndedProcesses is how many ended background processes a sandbox
// keeps listed (with their exit and output buffer); the oldest go first.
// MaxProcesses is how many may run in one sandbox at once (each holds
// an output buffer in serve's memory).
const (
	MaxEndedProcesses = 32
	MaxProcesses      = 64
)

// Process states.
const (
	ProcessRunning = "running"
	ProcessExited  = "exited"
)

// ProcessInfo is a background process as the API answers it: its pid
// in the sandbox, the caller's tag, its run id (runs/<run_id>/, written
// when it ends), and once it ended how: the run's status, exit code and
// error. OutputBytes counts what it wrote (stdout and stderr together):
// the offset its next output will have.
type ProcessInfo struct {
	PID         int        `json:"pid"`
	Tag         string     `json:"tag,omitempty"`
	RunID       string     `json:"run_id"`
	Argv        []string   `json:"argv"`
	Pty         bool       `json:"pty"`
	State       string     `json:"state"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	Status      job.Status `json:"status,omitempty"`
	ExitCode    *int       `json:"exit_code"`
	Error       *job.Error `json:"error,omitempty"`
	OutputBytes int64      `json:"output_bytes"`
}

// proc is one background process of a sandbox.
type proc struct {
	out    *output
	p      backend.Process
	stdin  *io.PipeWriter
	cancel context.CancelFunc
	// done is closed once the process ended and its run is recorded.
	done chan struct{}

	mu   sync.Mutex
	info ProcessInfo
}

// snapshot is the process's info now.
func (pc *proc) snapshot() ProcessInfo {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	info := pc.info
	info.OutputBytes = pc.out.size()
	return info
}

// ended reports whether the process ended.
func (pc *proc) ended() bool {
	select {
	case <-pc.done:
		return true
	default:
		return false
	}
}

// processes are a sandbox's background processes by pid: the running
// ones and the newest MaxEndedProcesses ended ones.
type processes struct {
	mu    sync.Mutex
	byPID map[int]*proc
	ended []int // pids of ended processes, oldest first
	// live counts the processes started and not yet ended.
	live int
	all  sync.WaitGroup
}

// begin counts one more process, unless MaxProcesses run:
// session.limit_reached.
func (t *processes) begin() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live >= MaxProcesses {
		return job.Errorf(job.CodeSessionLimit, "%d processes run in this sandbox already", t.live).With("max", MaxProcesses)
	}
	t.live++
	t.all.Add(1)
	return nil
}

// running counts the processes started and not yet ended.
func (t *processes) running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}

// release frees the slot of a process that ended (begin's count); its
// goroutine's t.all.Done follows once everything of it is done.
func (t *processes) release() {
	t.mu.Lock()
	t.live--
	t.mu.Unlock()
}

// add registers pc under its pid (replacing an ended one the pid was
// reused from).
func (t *processes) add(pc *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byPID == nil {
		t.byPID = map[int]*proc{}
	}
	t.byPID[pc.info.PID] = pc
}

// exited moves pc to the ended ones, dropping the oldest beyond
// MaxEndedProcesses.
func (t *processes) exited(pc *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = append(t.ended, pc.info.PID)
	for len(t.ended) > MaxEndedProcesses {
		old := t.ended[0]
		t.ended = t.ended[1:]
		if q := t.byPID[old]; q != nil && q.ended() {
			delete(t.byPID, old)
		}
	}
}

// get is process pid, or nil.
func (t *processes) get(pid int) *proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byPID[pid]
}

// list is every process's info, by start time.
func (t *processes) list() []ProcessInfo {
	t.mu.Lock()
	procs := make([]*proc, 0, len(t.byPID))
	for _, pc := range t.byPID {
		procs = append(procs, pc)
	}
	t.mu.Unlock()
	out := make([]ProcessInfo, 0, len(procs))
	for _, pc := range procs {
		out = append(out, pc.snapshot())
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].PID < out[j].PID
	})
	return out
}

// wait waits until every process ended and was recorded.
func (t *processes) wait() { t.all.Wait() }

// ParsePID reads a pid from a path: job.not_found when it is none.
func ParsePID(s string) (int, error) {
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, job.Errorf(job.CodeJobNotFound, "no process %q", s).With("pid", s)
	}
	return pid, nil
}
