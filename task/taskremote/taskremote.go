// Package taskremote carries agent tasks between a worker and the API
// node of another host: the task record's kind for the record mirror
// (package remote, which knows no task), the worker's hooks that publish
// a task's state, output and record, and the API node's side that applies
// them to its own task directories.
package taskremote

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/remote"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/taskevent"
)

// Tasks is an agent task's directory (<store>/tasks/<id>/, see
// task/stage.Layout): its state.json, the manifest (kept where the API
// node has it; a child submitted on the worker arrives with it), the
// children index, and outbox/: the logs, events.jsonl, progress and
// metrics, and the artifacts (the patch, metadata.json, copied files).
// The workspace (inbox/, base.git, home/, disk.img) stays on the worker;
// sockets are never carried (not regular files, and kept outside the
// directory).
//
// state.json commits the record. The API node has one from the submit
// (pending, or moved forward by the worker's state events): the record's
// replaces it, written last, unless it is terminal there already (a
// cancel that came first); and only a terminal state.json of the same
// task is accepted.
var Tasks = remote.Kind{
	Name:  "task",
	Files: []string{"manifest.yaml", "children", "outbox"},
	// manifest.yaml is as the API node stored it when it accepted the
	// task.
	Commit: state.StateFile,
	Keep:   []string{"manifest.yaml"},
	// Task ids follow the job id rule (manifest's metadata.id pattern),
	// so an id is one path name and a run of subject tokens.
	ValidID:     store.ValidJobID,
	Replace:     true,
	Final:       finalTaskState,
	CheckCommit: checkTaskState,
}

func finalTaskState(b []byte) bool {
	var rec state.Record
	return json.Unmarshal(b, &rec) == nil && rec.State.Terminal()
}

func checkTaskState(id string, b []byte) error {
	var rec state.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return job.Wrap(job.CodeInvalidRequest, err, "undecodable task state.json")
	}
	if rec.TaskID != id || !rec.State.Terminal() {
		return job.Errorf(job.CodeInvalidRequest, "record's state.json is not a terminal state of this task").
			With("task_id", rec.TaskID).With("state", string(rec.State))
	}
	return nil
}

// PublishTask returns the worker's hook (worker.Config.TaskRecorded): it
// carries the record of a terminal task in the directory dir(id). A
// delivery that left no record here (its message named another task) has
// nothing to carry; a task that is not terminal is an error, so its
// message is delivered again rather than acknowledged.
func PublishTask(p *remote.Publisher, dir func(id string) string) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		d := dir(id)
		b, err := remote.ReadCommit(filepath.Join(d, state.StateFile))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "cannot read the task's state.json").With("task_id", id)
		}
		if err := checkTaskState(id, b); err != nil {
			return err
		}
		return p.Publish(ctx, Tasks, id, 0, d)
	}
}

// TaskStates returns a worker's task observer (lifecycle.Config.Observer):
// every transition of a task it runs goes on the bus (taskevent.TypeState),
// which the API node's MirrorTasks follows; next, if set, hears it too.
func TaskStates(q *queue.Queue, next state.Observer) state.Observer {
	return func(from state.State, rec state.Record) {
		_ = taskevent.PublishState(q, rec)
		if next != nil {
			next(from, rec)
		}
	}
}

// MirrorTasks starts, until ctx ends, the API node's side for tasks: the
// Mirror of task records into the directories dir(id), and the follower
// of the workers' task state events that moves a task running on another
// worker forward (staging, running...). obs, if set, hears every
// transition either makes (metrics).
func MirrorTasks(ctx context.Context, q *queue.Queue, dir func(id string) string, obs state.Observer, lim remote.Limits, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &taskSide{dir: dir, obs: obs, q: q}
	m, err := remote.NewMirror(ctx, q.Conn(), remote.MirrorConfig{
		Kind: Tasks, Dir: dir, Limits: lim, Durable: true, Logger: log, Lock: &t.mu,
		Committed: t.committed, Refused: t.refused,
	})
	if err != nil {
		return err
	}
	stop, err := q.Watch(ctx, taskevent.Kind, "", t.status)
	if err != nil {
		return err
	}
	go func() {
		defer stop()
		if err := m.Run(ctx); err != nil {
			log.Error("task record mirror stopped", "error", err)
		}
	}()
	return nil
}

// liveFiles are the progress files a worker's live output events are
// appended to, and what the API node's task_recorded calls each.
var liveFiles = map[string]struct{ name, record string }{
	taskevent.TypeStdout:  {"stdout.log", "stdout"},
	taskevent.TypeStderr:  {"stderr.log", "stderr"},
	taskevent.TypeMetrics: {agentstep.HeartbeatFile, "metrics"},
}

// taskSide keeps a task's state.json on the API node in step with the
// worker running it. mu is held by the Mirror while it applies a record
// and by the follower while it moves a task: a state event never lands
// on a record just finished.
type taskSide struct {
	mu  sync.Mutex
	dir func(id string) string
	obs state.Observer
	// q hears what this node wrote of a task (taskevent.TypeRecorded),
	// so the task's streams here read it.
	q *queue.Queue
}

// status moves a task this node has a record of forward to the state of
// a worker's event, one lifecycle step at a time (events missed while
// this node was down are stepped through). Terminal states are left to
// the record; a task already there, further along or terminal stays.
func (t *taskSide) status(env queue.Envelope) {
	if !Tasks.ValidID(env.ID) {
		return
	}
	switch env.Type {
	case taskevent.TypeStdout, taskevent.TypeStderr, taskevent.TypeMetrics:
		var out taskevent.Output
		if json.Unmarshal(env.Payload, &out) != nil {
			return
		}
		f := liveFiles[env.Type]
		if t.output(env.ID, f.name, out.Data) {
			_ = taskevent.PublishRecorded(t.q, env.ID, f.record)
		}
		return
	case taskevent.TypeState:
	default:
		return
	}
	var ev taskevent.State
	if json.Unmarshal(env.Payload, &ev) != nil || ev.TaskID != env.ID {
		return
	}
	to := state.State(ev.State)
	target := slices.Index(state.All, to)
	if target < 0 || to.Terminal() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.dir(ev.TaskID)
	if _, err := os.Stat(filepath.Join(d, state.StateFile)); err != nil {
		return // a task this node never recorded (a child submitted on the worker)
	}
	m, err := state.Open(d)
	if err != nil {
		return
	}
	m.Observe(t.obs)
	for {
		cur := m.Current().State
		i := slices.Index(state.All, cur)
		if cur.Terminal() || i < 0 || i >= target {
			return
		}
		if m.Transition(state.All[i+1], "reported by the worker running the task", nil) != nil {
			return
		}
		_ = taskevent.PublishRecorded(t.q, ev.TaskID, "state")
	}
}

// output appends a live chunk of a task's output (or a heartbeat line)
// to its progress log on this node, where the task stream reads it, while
// the task is active here and the log is under the agent's cap, and
// reports whether it did; the record replaces the log with the worker's
// whole one when the task ends. A task staged in this
// directory (a worker sharing the store) writes its log itself.
func (t *taskSide) output(id, name string, p []byte) (written bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	root, err := os.OpenRoot(t.dir(id))
	if err != nil {
		return false // a task this node never recorded
	}
	defer root.Close()
	if _, err := root.Stat("inbox"); err == nil {
		return false // staged here: the worker shares this store and writes the log itself
	}
	m, err := state.Open(t.dir(id))
	if err != nil || m.Current().State.Terminal() {
		return false
	}
	f, err := root.OpenFile(filepath.Join("outbox", "progress", name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size()+int64(len(p)) > agentstep.DefaultMaxLogBytes {
		return false
	}
	_, err = f.Write(p) // a lost live chunk: the record brings the whole log
	return err == nil
}

// TaskOutput is the worker's lifecycle Output hook: each chunk of a
// task's scrubbed output goes on the bus (taskevent.PublishOutput), so the
// API node streams a task that runs here live.
func TaskOutput(q *queue.Queue) func(taskID, stream string, p []byte) {
	return func(taskID, stream string, p []byte) {
		_ = taskevent.PublishOutput(q, taskID, stream, p) // live view only; the record carries the logs
	}
}

// committed announces the record just written (TypeRecorded) and tells
// the observer about the terminal state it brought (from what it
// replaced).
func (t *taskSide) committed(_ context.Context, m remote.Manifest, prev []byte) {
	_ = taskevent.PublishRecorded(t.q, m.ID, "record")
	if t.obs == nil {
		return
	}
	b, err := remote.ReadCommit(filepath.Join(t.dir(m.ID), state.StateFile))
	if err != nil {
		return
	}
	var rec, old state.Record
	if json.Unmarshal(b, &rec) != nil {
		return
	}
	if prev != nil {
		_ = json.Unmarshal(prev, &old)
	}
	t.obs(old.State, rec)
}

// refused ends, failed with the reason, a task whose record can never be
// applied here, so it does not stay pending or running.
func (t *taskSide) refused(_ context.Context, id string, _ int, jerr *job.Error) {
	d := t.dir(id)
	if _, err := os.Stat(filepath.Join(d, state.StateFile)); err != nil {
		return // a task this node never recorded
	}
	m, err := state.Open(d)
	if err != nil {
		return
	}
	m.Observe(t.obs)
	if !m.Current().State.Terminal() && m.Transition(state.Failed, jerr.Message, jerr) == nil {
		_ = taskevent.PublishRecorded(t.q, id, "state")
	}
}
