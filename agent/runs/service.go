// Package agentapi is serve's capability-runs door: it launches a scripted
// task or a mock-agent run from a manifest sent over HTTP, runs it in the
// background with its subprocess tools in one sandbox of serve's run
// service, and serves each run's status, compiled policy, summary and
// audit trail (with the hash chain verified). Manifests are held to serve's workspace roots
// before anything is created: a submitter gets no filesystem reach beyond
// what POST /v1/jobs already gives it.
package runs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agent-runner/agent-runner/agent/launch"
	"github.com/agent-runner/agent-runner/agent/loop"
	"github.com/agent-runner/agent-runner/agent/manifest"
	"github.com/agent-runner/agent-runner/agent/model"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// Modes of a launch request.
const (
	ModeTask = "task" // a scripted task's steps, in order
	ModeMock = "mock" // the agent loop with the deterministic mock model
)

// modeMock is the session mode the agent loop records for the mock model
// (run-agent --model mock records the same).
const modeMock = "agent:mock"

// DefaultMessage is the user's request of a mock run that names none.
const DefaultMessage = "Find the errors in the logs and summarize them."

// DefaultMaxRunning bounds the runs in progress at once.
const DefaultMaxRunning = 16

// DefaultRetention is how long a run is kept after it ended (the jobs'
// default, runner.DefaultRetention).
const DefaultRetention = 7 * 24 * time.Hour

// Config is what a Service needs from serve.
type Config struct {
	// Dir holds the run directories (<store-dir>/agent-runs).
	Dir string
	// Runner is the run service each run's subprocess tools run in, as
	// processes of one sandbox of the run (launch.Options.Runner):
	// serve's, on this host.
	Runner *runner.Runner
	// Backend is the backend kind subprocess tools run on (serve's
	// --default-backend).
	Backend string
	// Roots are serve's workspace roots: every filesystem root of a
	// manifest must lie under them. Relative manifest paths and task
	// paths are resolved against the first.
	Roots *workspaceroot.Roots
	// MaxRunning is the most runs in progress at once (default
	// DefaultMaxRunning); beyond it a launch is queue.full.
	MaxRunning int
	// Retention is how long Retain keeps a run after it ended (default
	// DefaultRetention).
	Retention time.Duration
	// Events, when set, carries each run's progress to live viewers
	// (events.go): serve's queue.
	Events *queue.Queue
	Logger *slog.Logger
}

// Service launches runs and reads their directories.
type Service struct {
	cfg Config
	// ctx is serve's lifetime, the parent of every run: runs outlive the
	// request that launched them (as http.Server.BaseContext does).
	ctx     context.Context
	wg      sync.WaitGroup
	records *store.Records

	mu      sync.Mutex
	running map[string]*active
}

// active is a run in progress: what it is, the host paths it holds
// (hold.go), and the release of its record's lock.
type active struct {
	info   Info
	reach  reach
	unlock func()
}

// New returns a Service whose runs live under cfg.Dir; ctx ends every
// run in progress (serve's shutdown), each recorded canceled.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Roots == nil || len(cfg.Roots.Dirs) == 0 {
		return nil, job.Errorf(job.CodeInvalidRequest, "agent runs need workspace roots")
	}
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = DefaultMaxRunning
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = cfg.Logger.With("component", "agent_runs")
	records, err := store.OpenRecords(cfg.Dir, store.CapabilityRuns)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, ctx: ctx, records: records, running: map[string]*active{}}, nil
}

// LaunchRequest is what a run is launched from (the body of POST
// /v1/agent-runs).
type LaunchRequest struct {
	ManifestYAML string `json:"manifest_yaml"`
	// Mode is ModeTask or ModeMock.
	Mode string `json:"mode"`
	// TaskYAML is the scripted task (mode task): YAML or JSON.
	TaskYAML string `json:"task_yaml,omitempty"`
	// Message is the user's request to the mock agent (mode mock;
	// default DefaultMessage).
	Message string `json:"message,omitempty"`
}

// Launch checks req, claims a minted run id in the store, opens the run
// (its directory, audit log and run_start) and runs it in the background,
// holding its record's lock, its progress published (events.go). A
// manifest that does not compile, or whose paths lie outside the
// workspace roots, is refused before anything is written.
func (s *Service) Launch(req LaunchRequest) (Info, error) {
	var task *launch.Task
	switch req.Mode {
	case ModeTask:
		t, err := launch.ParseTaskYAML([]byte(req.TaskYAML))
		if err != nil {
			return Info{}, err
		}
		if len(t.Steps) == 0 {
			return Info{}, job.Errorf(job.CodeInvalidRequest, "task_yaml: a task needs at least one step").With("field", "task_yaml")
		}
		task = t
	case ModeMock:
		if req.TaskYAML != "" {
			return Info{}, job.Errorf(job.CodeInvalidRequest, "task_yaml is for mode task only").With("field", "task_yaml")
		}
		if req.Message == "" {
			req.Message = DefaultMessage
		}
	default:
		return Info{}, job.Errorf(job.CodeInvalidRequest, "mode must be %q or %q, not %q", ModeTask, ModeMock, req.Mode).With("field", "mode")
	}
	m, err := manifest.ParseYAML([]byte(req.ManifestYAML))
	if err != nil {
		return Info{}, err
	}
	if err := s.checkCommands(m); err != nil {
		return Info{}, err
	}
	p, err := manifest.Compile(m, s.base())
	if err != nil {
		return Info{}, err
	}
	r, err := s.reachOf(p)
	if err != nil {
		return Info{}, err
	}
	id := uuid.NewString()
	a, err := s.admit(id, r, Info{RunID: id, Status: StatusRunning, Mode: req.Mode, Agent: p.Name, StartedAt: time.Now().UTC()})
	if err != nil {
		return Info{}, err
	}
	if err := s.claim(a, id, req); err != nil {
		s.done(id)
		return Info{}, err
	}
	sess, err := s.open(id, req)
	if err != nil {
		// Nothing half-opened stays behind.
		if rerr := s.records.Remove(id); rerr != nil {
			s.cfg.Logger.Warn("cannot remove the record of a run that did not open", "run_id", id, "error", rerr)
		}
		s.done(id)
		return Info{}, err
	}
	s.mu.Lock()
	a.info.StartedAt = sess.Started
	info := a.info
	s.mu.Unlock()
	if task != nil {
		if err := s.records.WriteFile(id, "task.yaml", []byte(req.TaskYAML), false); err != nil {
			sess.Finish(launch.ExitCanceled, "")
			s.done(id)
			return Info{}, job.Wrap(job.CodeRunIOFailed, err, "copy task")
		}
	}
	s.publish(Progress{RunID: id, Status: StatusRunning})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer sess.Close()
		sum, err := s.run(sess, task, req.Message)
		s.done(sess.ID)
		if err != nil {
			s.cfg.Logger.Warn("agent run ended with an error", "run_id", sess.ID, "error", err)
		}
		s.publish(s.ended(sess.ID, sess.Dir, sum))
	}()
	return info, nil
}

// run walks task's steps, or (no task) runs the mock agent on message,
// and finishes the session.
func (s *Service) run(sess *launch.Session, task *launch.Task, message string) (launch.Summary, error) {
	if task != nil {
		return sess.RunTask(s.ctx, task)
	}
	client := &model.Mock{}
	if read := sess.Manifest.Capabilities.Filesystem.Read; len(read) > 0 {
		client.Dir = read[0]
	}
	return loop.Run(s.ctx, sess, loop.Config{Client: client, Message: message})
}

// claim takes run id's lock (held until done) and creates its record in
// the store, with the digest of req. The id is minted, so a record that
// already exists is job.conflict.
func (s *Service) claim(a *active, id string, req LaunchRequest) error {
	unlock, err := s.records.Lock(s.ctx, id, false)
	if errors.Is(err, store.ErrRunLocked) {
		return job.Errorf(job.CodeJobConflict, "agent run %s is in progress elsewhere", id).With("run_id", id)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	a.unlock = unlock
	s.mu.Unlock()
	b, err := json.Marshal(req)
	if err != nil {
		return job.Wrap(job.CodeInternal, err, "encode launch request")
	}
	sum := sha256.Sum256(b)
	created, err := s.records.Claim(id, hex.EncodeToString(sum[:]), func(string) error { return nil })
	if err == nil && !created {
		err = job.Errorf(job.CodeJobConflict, "agent run %s already exists", id).With("run_id", id)
	}
	return err
}

// open writes the manifest where launch.Open reads it and opens the
// session (launch.Open copies it into the run directory).
func (s *Service) open(id string, req LaunchRequest) (*launch.Session, error) {
	f, err := os.CreateTemp(s.cfg.Dir, ".manifest-*.yaml")
	if err != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, err, "stage manifest")
	}
	defer os.Remove(f.Name())
	_, werr := f.WriteString(req.ManifestYAML)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, job.Wrap(job.CodeRunIOFailed, werr, "stage manifest")
	}
	mode := launch.ModeScripted
	if req.Mode == ModeMock {
		mode = modeMock
	}
	return launch.Open(s.ctx, f.Name(), mode, launch.Options{
		RunsDir: s.records.Dir(), Cwd: s.base(), Runner: s.cfg.Runner, Backend: s.cfg.Backend, Logger: s.cfg.Logger,
		NewID: func() string { return id }, OnStep: s.onStep(id),
	})
}

// done forgets a finished run and releases its record's lock: its
// directory answers from now on.
func (s *Service) done(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.running[id]; a != nil && a.unlock != nil {
		a.unlock()
	}
	delete(s.running, id)
}

// Wait returns once every run launched so far has finished.
func (s *Service) Wait() { s.wg.Wait() }

// base is the directory relative manifest and task paths are resolved
// against: the first workspace root.
func (s *Service) base() string { return s.cfg.Roots.Dirs[0] }
