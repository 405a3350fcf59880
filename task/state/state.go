// Package state is the agent-task state machine of seed 004: the states,
// the legal transitions between them, and a checkpoint on disk that
// survives any crash: every transition rewrites state.json atomically (temp
// file, fsync, rename) and appends one line to events.jsonl, so a restarted
// server finds every task in a recorded state, and a torn or corrupted
// state.json is rebuilt from the event log.
package state

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/store"
)

// State is a task's lifecycle state.
type State string

// The states of seed 004.
const (
	Pending         State = "pending"
	Staging         State = "staging"
	Provisioning    State = "provisioning"
	Ready           State = "ready"
	Running         State = "running"
	Completing      State = "completing"
	Completed       State = "completed"
	Failed          State = "failed"
	FailedPreserved State = "failed_preserved"
	Cancelled       State = "cancelled"
)

// All lists every state in lifecycle order.
var All = []State{Pending, Staging, Provisioning, Ready, Running, Completing, Completed, Failed, FailedPreserved, Cancelled}

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool {
	return s == Completed || s == Failed || s == FailedPreserved || s == Cancelled
}

// next lists the forward step of each active state; failure and
// cancellation are allowed from every active state on top of it.
var next = map[State][]State{
	Pending:      {Staging},
	Staging:      {Provisioning},
	Provisioning: {Ready},
	Ready:        {Running},
	Running:      {Completing, FailedPreserved},
	Completing:   {Completed, FailedPreserved},
}

// Legal reports whether from -> to is a transition of the lifecycle.
func Legal(from, to State) bool {
	if from.Terminal() {
		return false
	}
	if to == Failed || to == Cancelled {
		return true
	}
	for _, s := range next[from] {
		if s == to {
			return true
		}
	}
	return false
}

// File names in a task directory.
const (
	StateFile  = "state.json"
	EventsFile = "outbox/progress/events.jsonl"
)

// Record is the content of state.json.
type Record struct {
	TaskID         string     `json:"task_id"`
	ParentID       string     `json:"parent_id,omitempty"`
	State          State      `json:"state"`
	Reason         string     `json:"reason,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	StartedAt      *time.Time `json:"started_at,omitempty"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
	LastCheckpoint time.Time  `json:"last_checkpoint"`
	Error          *job.Error `json:"error,omitempty"`
}

// Event is one line of events.jsonl.
type Event struct {
	Time   time.Time `json:"time"`
	Type   string    `json:"type"`
	TaskID string    `json:"task_id"`
	From   State     `json:"from,omitempty"`
	To     State     `json:"to"`
	Reason string    `json:"reason,omitempty"`
	// ParentID is set on a child's first event, so a rebuilt checkpoint
	// keeps it.
	ParentID string `json:"parent_id,omitempty"`
}

// Observer hears about every committed transition (metrics). from is ""
// for a task entering its first state in this process.
type Observer func(from State, rec Record)

// Machine is one task's state, checkpointed in its directory.
type Machine struct {
	dir string
	mu  sync.Mutex
	rec Record
	now func() time.Time
	obs Observer
}

// Create starts a task in pending and writes its first checkpoint.
// parentID is empty for a top-level task.
func Create(dir, taskID, parentID string) (*Machine, error) {
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(EventsFile)), 0o700); err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "cannot create the task directory")
	}
	m := &Machine{dir: dir, now: func() time.Time { return time.Now().UTC() }}
	now := m.now()
	m.rec = Record{TaskID: taskID, ParentID: parentID, State: Pending, CreatedAt: now}
	if err := m.commit(Event{Type: "state_change", TaskID: taskID, To: Pending, Reason: "submitted", ParentID: parentID}); err != nil {
		return nil, err
	}
	return m, nil
}

// Observe sets the observer told about this machine's later transitions.
func (m *Machine) Observe(o Observer) {
	m.mu.Lock()
	m.obs = o
	m.mu.Unlock()
}

// Open loads a task's checkpoint. A missing, torn or corrupted state.json
// is rebuilt from the last valid line of events.jsonl (and rewritten).
func Open(dir string) (*Machine, error) {
	m := &Machine{dir: dir, now: func() time.Time { return time.Now().UTC() }}
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err == nil && json.Unmarshal(b, &m.rec) == nil && m.rec.TaskID != "" && validState(m.rec.State) {
		return m, nil
	}
	ev, first, evErr := lastEvent(filepath.Join(dir, EventsFile))
	if evErr != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, errors.Join(err, evErr), "task checkpoint is unreadable and no event log can rebuild it").With("dir", dir)
	}
	m.rec = Record{TaskID: ev.TaskID, ParentID: first.ParentID, State: ev.To, Reason: "recovered from events.jsonl: " + ev.Reason, CreatedAt: first.Time, LastCheckpoint: ev.Time}
	if err := m.writeState(); err != nil {
		return nil, err
	}
	return m, nil
}

func validState(s State) bool {
	for _, v := range All {
		if v == s {
			return true
		}
	}
	return false
}

// lastEvent returns the last and the first well-formed events.
func lastEvent(path string) (Event, Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return Event{}, Event{}, err
	}
	defer f.Close()
	var last, first Event
	found := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.TaskID == "" || !validState(ev.To) {
			continue // a torn last line, or garbage
		}
		if !found {
			first = ev
		}
		last, found = ev, true
	}
	if !found {
		return Event{}, Event{}, errors.New("no valid event in events.jsonl")
	}
	return last, first, nil
}

// Current returns a copy of the record.
func (m *Machine) Current() Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rec
}

// Transition moves the task to `to`, checkpointing before it returns. An
// illegal transition is refused with job.conflict and changes nothing.
func (m *Machine) Transition(to State, reason string, cause *job.Error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	from := m.rec.State
	if !Legal(from, to) {
		return job.Errorf(job.CodeJobConflict, "illegal task transition %s -> %s", from, to).
			With("task_id", m.rec.TaskID).With("from", string(from)).With("to", string(to))
	}
	prev := m.rec
	now := m.now()
	m.rec.State, m.rec.Reason = to, reason
	if to == Running && m.rec.StartedAt == nil {
		m.rec.StartedAt = &now
	}
	if to.Terminal() {
		m.rec.EndedAt = &now
		m.rec.Error = cause
	}
	if err := m.commit(Event{Type: "state_change", TaskID: m.rec.TaskID, From: from, To: to, Reason: reason}); err != nil {
		m.rec = prev
		return err
	}
	if m.obs != nil {
		m.obs(from, m.rec)
	}
	return nil
}

// Note appends a non-transition event (for example workspace_destroyed)
// to events.jsonl; the state does not change.
func (m *Machine) Note(typ, reason string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commit(Event{Type: typ, TaskID: m.rec.TaskID, From: m.rec.State, To: m.rec.State, Reason: reason})
}

// commit appends the event, then atomically replaces state.json.
func (m *Machine) commit(ev Event) error {
	ev.Time = m.now()
	m.rec.LastCheckpoint = ev.Time
	line, _ := json.Marshal(ev)
	f, err := os.OpenFile(filepath.Join(m.dir, EventsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot append to events.jsonl")
	}
	_, werr := f.Write(append(line, '\n'))
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return job.Wrap(job.CodeRunIOFailed, werr, "cannot append to events.jsonl")
	}
	return m.writeState()
}

func (m *Machine) writeState() error {
	b, _ := json.MarshalIndent(m.rec, "", "  ")
	return store.WriteFileAtomic(filepath.Join(m.dir, StateFile), append(b, '\n'), 0o600)
}
