package runner

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/policy"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/validation"
)

// Config is the runner-side configuration: defaults and maxima for limits,
// the policy settings only the operator may change, and the store.
type Config struct {
	StoreDir string
	// DefaultBackend is used when a request names none (default
	// "linux_sandbox": a runner never falls back to an unisolated backend).
	DefaultBackend string
	// Backends, when non-empty, are the backends this runner runs, built
	// by the door from the operator's flags; they are the only kinds it
	// runs. A request naming another is refused by Prepare
	// (validation.invalid_request), and Execute ends a job queued with one
	// as backend_unavailable. serve, worker and mcp leave local_process out
	// unless the operator passed --unsafe-local-process. Empty: every
	// registered kind, with its default configuration (backend.Lookup).
	Backends backend.Set
	Defaults job.Limits
	Max      job.Limits
	Policy   policy.Config
	// Images resolves the images requests name (backend.image, a
	// sandbox's image); nil refuses every image
	// (validation.invalid_request).
	Images ImageResolver
	// Egress is the egress gateway and ceiling for "allowlist" jobs; nil
	// refuses them. AllowHostNetwork lets jobs use network "host".
	Egress           *egress.Operator
	AllowHostNetwork bool
	// RequireEnforcement turns a backend that cannot enforce a limit into
	// a backend_unavailable result instead of a recorded "not_enforced",
	// for every backend and every limit it names (requiredLimits), asked
	// for or not. Without it, the memory, CPU and process limits a job
	// asks for still fail closed on an isolating backend: linux_sandbox
	// refuses such a job (backend_unavailable) before any of its code
	// runs unless it was built with backend.Config.AllowUnenforcedLimits
	// (the doors' --allow-unenforced-limits), and the result then says
	// not_enforced. Only the backend knows, per run, whether its cgroup
	// was made, so that default lives there.
	RequireEnforcement bool
	// KillGrace is the time between SIGTERM and SIGKILL (default 2 s).
	KillGrace time.Duration
	// MaxSnapshotBytes and MaxSnapshotFiles bound a workspace snapshot.
	MaxSnapshotBytes int64
	MaxSnapshotFiles int
	// Durable fsyncs every result.json (power-loss safe records, ~2 ms per
	// job here); records are atomic against process crashes either way.
	Durable bool
	Logger  *slog.Logger
	// CacheMaxBytes caps the blocks of each build cache
	// (workspace.caches) and CacheMaxInodes its entries of every type,
	// checked in the background after every job that used it (defaults
	// buildcache.DefaultMaxBytes, DefaultMaxInodes); CacheMaxAge removes
	// a cache no job used for that long (default buildcache.DefaultMaxAge).
	CacheMaxBytes  int64
	CacheMaxInodes int64
	CacheMaxAge    time.Duration
	// SharedStore says API nodes and workers of one queue share this
	// store: runs found started belong to the queue's redelivery.
	SharedStore bool
	// OwnStore makes this runner the store's owner (store.Own): the one
	// process that recovers and retains (serve). Any number of processes
	// that do not own it (run, replay, mcp) use the store beside it.
	OwnStore bool
}

// DefaultBaseEnv is every child's starting environment unless configured.
var DefaultBaseEnv = map[string]string{
	"PATH": "/usr/local/bin:/usr/bin:/bin",
	"LANG": "C.UTF-8",
}

// Runner runs jobs. It is safe for concurrent use.
type Runner struct {
	cfg    Config
	store  *store.Store
	caches *buildcache.Caches
	log    *slog.Logger
	// active maps the ids of jobs executing in this runner to a channel
	// closed when the attempt ends (Run waits on it), so a
	// duplicate Execute of a running id cannot clear its record.
	active sync.Map
}

// withDefaults fills what a zero Config leaves out.
func (cfg Config) withDefaults() Config {
	if cfg.StoreDir == "" {
		cfg.StoreDir = "agent-runner-runs"
	}
	if cfg.DefaultBackend == "" {
		cfg.DefaultBackend = "linux_sandbox"
	}
	if cfg.Policy.BaseEnv == nil {
		cfg.Policy.BaseEnv = DefaultBaseEnv
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 2 * time.Second
	}
	if cfg.MaxSnapshotBytes == 0 {
		cfg.MaxSnapshotBytes = 4 << 30
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// Validate is Prepare without a runner: it checks req against cfg's rules
// and fills its defaults, opening no store (agent-runner validate).
func Validate(cfg Config, req *job.Request) error {
	cfg = cfg.withDefaults()
	r := &Runner{cfg: cfg, log: cfg.Logger}
	return r.Prepare(req)
}

// New opens the store and returns a Runner.
func New(cfg Config) (*Runner, error) {
	cfg = cfg.withDefaults()
	st, err := store.Open(cfg.StoreDir)
	if err != nil {
		return nil, err
	}
	if cfg.OwnStore {
		if err := st.Own(); err != nil {
			return nil, err
		}
	}
	st.Durable = cfg.Durable
	if cfg.CacheMaxBytes <= 0 {
		cfg.CacheMaxBytes = buildcache.DefaultMaxBytes
	}
	if cfg.CacheMaxAge <= 0 {
		cfg.CacheMaxAge = buildcache.DefaultMaxAge
	}
	r := &Runner{cfg: cfg, store: st, log: cfg.Logger.With("component", "runner")}
	if err := r.openCaches(); err != nil {
		st.Close()
		return nil, err
	}
	r.CollectCaches()
	return r, nil
}

// Close waits for the build caches' background trims and releases the
// runner's hold of the store's owner lock, if any.
func (r *Runner) Close() error {
	r.waitCaches()
	// A backend that finishes work in the background (linux_sandbox
	// removes a one-shot run's cgroups after it) is waited for, so a
	// process that exits after Close leaves nothing of its runs behind.
	for _, b := range r.cfg.Backends {
		if c, ok := b.(io.Closer); ok {
			c.Close()
		}
	}
	return r.store.Close()
}

// Store returns the run store.
func (r *Runner) Store() *store.Store { return r.store }

// Config returns the runner configuration.
func (r *Runner) Config() Config { return r.cfg }

// Enabled reports whether this runner runs jobs on backend kind (see
// Config.Backends).
func (r *Runner) Enabled(kind string) bool {
	if len(r.cfg.Backends) == 0 {
		return true
	}
	_, ok := r.cfg.Backends[kind]
	return ok
}

// backend is the instance that runs kind: Config.Backends', else the
// registered default.
func (r *Runner) backend(kind string) (backend.Backend, bool) {
	if len(r.cfg.Backends) > 0 {
		b, ok := r.cfg.Backends[kind]
		return b, ok
	}
	return backend.Lookup(kind)
}

// NewJobID returns a fresh "job_<uuid>" id (UUIDv7, so ids sort by time).
func NewJobID() string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return "job_" + id.String()
}

// Prepare validates req in place, fills defaults and assigns a job id. It
// returns a *job.Error with a validation.* code for a bad request; nothing
// is written.
func (r *Runner) Prepare(req *job.Request) error {
	err := validation.Request(req, validation.Config{
		Defaults:       r.cfg.Defaults,
		Max:            r.cfg.Max,
		DefaultBackend: r.cfg.DefaultBackend,
		KnownBackend:   func(k string) bool { _, built := r.cfg.Backends[k]; return built || backend.Known(k) },
	})
	if err != nil {
		return err
	}
	if !r.Enabled(req.Backend.Kind) {
		return job.Errorf(job.CodeInvalidRequest, "backend.kind: %s is not enabled on this runner", req.Backend.Kind).
			With("field", "backend.kind").With("kind", req.Backend.Kind).With("enabled", r.cfg.Backends.Kinds())
	}
	b, ok := r.backend(req.Backend.Kind)
	if !ok {
		return job.Errorf(job.CodeInvalidRequest, "backend.kind: %s cannot be built on this runner", req.Backend.Kind).
			With("field", "backend.kind").With("kind", req.Backend.Kind)
	}
	if req.Workspace.SnapshotStrategy == job.SnapshotOverlay && !b.Capabilities().Overlay {
		return job.Errorf(job.CodeInvalidRequest, "workspace.snapshot_strategy: overlay needs a backend that mounts overlays").
			With("field", "workspace.snapshot_strategy").With("backend", req.Backend.Kind)
	}
	if err := r.checkImage(req.Backend.Image, b, "backend.image"); err != nil {
		return err
	}
	if (len(req.Workspace.ReadOnlyMounts) > 0 || len(req.Workspace.Caches) > 0) && !b.Capabilities().Binds {
		return job.Errorf(job.CodeInvalidRequest, "workspace.readonly_mounts and workspace.caches need a backend that binds directories (linux_sandbox)").
			With("field", "workspace").With("backend", req.Backend.Kind)
	}
	if req.JobID == "" {
		req.JobID = NewJobID()
	}
	return nil
}

// Run validates and executes req. The error is non-nil only when the
// request is invalid (a *job.Error with a validation.* code), in which case
// no job record exists; every other outcome, including policy denials,
// timeouts and backend failures, is a Result.
func (r *Runner) Run(ctx context.Context, req job.Request, opts Options) (job.Result, error) {
	start := time.Now()
	if err := r.Prepare(&req); err != nil {
		return job.Result{}, err
	}
	if opts.Stage != nil {
		opts.Stage(req.JobID, "validate", time.Since(start))
	}
	// The id is claimed atomically; a different request under it is
	// job.conflict.
	if _, err := r.store.Claim(req, store.StatusRecord{JobID: req.JobID, Status: job.StatusQueued, Backend: req.Backend.Kind}); err != nil {
		return job.Result{}, err
	}
	// The same request that ran or is running here is waited for and
	// answered from its record.
	return r.execute(ctx, req, opts, true), nil
}

// RunRequest is the one-call library entry (seed 002's run_request): it
// opens the store at storeDir with default configuration and runs req.
func RunRequest(ctx context.Context, req job.Request, storeDir string) (job.Result, error) {
	r, err := New(Config{StoreDir: storeDir})
	if err != nil {
		return job.Result{}, err
	}
	return r.Run(ctx, req, Options{Attempt: 1})
}
