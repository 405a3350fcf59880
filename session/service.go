package session

import (
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/secretfile"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// Publisher puts an event on the bus (queue.Queue.Publish); sessions
// publish kind EventKind.
type Publisher interface {
	Publish(kind, id, typ string, payload any) error
}

// Config is what the service is built from; cmd/agent-runner's serve
// fills it from its flags.
type Config struct {
	// Runner is the run service the sandboxes and their execs run on;
	// Records the store's sessions (store.Sessions).
	Runner  *runner.Runner
	Records *store.Records
	// Backends are the kinds a sandbox may name; DefaultBackend the one
	// it gets when it names none. A backend that is not isolating is
	// refused unless UnsafeLocalProcess.
	Backends           backend.Set
	DefaultBackend     string
	UnsafeLocalProcess bool
	// Egress is the operator's egress gateway and ceiling (serve's
	// --egress-allow): a sandbox with network allowlist gets a bridge to
	// the gateway with its allowed_hosts, which must lie within the
	// ceiling; nil refuses allowlist. AllowHostNetwork lets a sandbox
	// use network host (--allow-host-network).
	Egress           *egress.Operator
	AllowHostNetwork bool
	// Roots hold a workspace.path (serve's --workspace-root); nil
	// refuses one.
	Roots *workspaceroot.Roots
	// Max are the maxima of a sandbox's limits (zero fields:
	// validation.DefaultMax); Defaults fill what a request leaves out
	// (zero: validation.DefaultLimits).
	Max, Defaults job.Limits
	// DefaultTimeout is a sandbox's timeout_s when it sets none (default
	// 10 minutes), MaxTimeout the most it may set (default 24 hours).
	DefaultTimeout, MaxTimeout time.Duration
	// DefaultIdleTimeout is a sandbox's idle_timeout_s when it sets none
	// (0: never idle); MaxIdleTimeout the most it may set (default
	// MaxTimeout). See idle.go.
	DefaultIdleTimeout, MaxIdleTimeout time.Duration
	// MaxPaused is how long a sandbox paused at its timeout (on_timeout
	// "pause") is held before it ends expired (default DefaultMaxPaused).
	// See timeout.go.
	MaxPaused time.Duration
	// MaxSandboxes caps the live sandboxes (default 16); MaxPerOwner
	// those of one owner (WithOwner: the token that created them; 0: no
	// cap of its own). See caps.go.
	MaxSandboxes, MaxPerOwner int
	// MemoryOvercommit and CPUOvercommit, when positive, cap the live
	// sandboxes' memory_mb at HostMemoryMB times it and their cpu_count
	// at HostCPUs times it (zero host fields: read from this host).
	MemoryOvercommit, CPUOvercommit float64
	HostMemoryMB                    int64
	HostCPUs                        int
	// MaxFileBytes caps one file read or write (default 16 MiB).
	MaxFileBytes int64
	// Secrets is the operator's secrets file (serve's --secrets-file), the
	// only secrets a create may name (secrets.go); nil refuses any.
	// Getenv reads its env entries (nil: os.Getenv).
	Secrets *secretfile.File
	Getenv  func(string) string
	// Policy is the operator's session policy: what an exec in a
	// sandbox without a policy of its own runs under. Nil: any program
	// inside the sandbox's view, with the shell and the exec's env.
	Policy *job.Policy
	// Templates are the operator's named sandbox templates (serve's
	// --sandbox-templates); a template with a pool keeps that many
	// sandboxes created and frozen in PoolDir (default: session-pool
	// beside the records' directory; a claimed sandbox's workspace stays
	// there until it ends).
	Templates map[string]Template
	PoolDir   string
	// PoolRefillDelay is how long the pools wait after a claim before
	// they refill (0: at once): a burst of creates is not slowed by the
	// creation of their replacements.
	PoolRefillDelay time.Duration
	// Events, when set, gets every state change and run status change
	// (EventKind); Feed, when set, is read by FollowEvents (both serve's
	// event bus).
	Events Publisher
	Feed   Feed
	// Saved, when set, gets every record once it is written (a
	// worker sends them to the API node: package door/sessionapi/sessionremote).
	Saved func(Record)
	// Recorded, when set, gets the run id of every exec and background
	// process once its run record is complete (a worker sends those
	// records to the API node).
	Recorded func(runID string)
	Logger   *slog.Logger
	Durable  bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Defaults of Config's zero fields.
const (
	DefaultTimeout      = 10 * time.Minute
	DefaultMaxTimeout   = 24 * time.Hour
	DefaultMaxSandboxes = 16
	DefaultMaxFileBytes = 16 << 20
)

// Service keeps sandboxes. It is safe for concurrent use.
type Service struct {
	cfg Config
	mu  sync.Mutex
	// live are the sandboxes of this process, by id; pending are the
	// claims of the creates in progress (held to the caps with them).
	live    map[string]*handle
	pending map[*claim]bool
	// pools are the templates' warm pools (their counts guarded by mu).
	pools *pools
	// isolating says which backends isolate (their capabilities, asked
	// once: linux_sandbox probes its cgroups each time it is asked).
	isolating map[string]bool
	// placing orders the changes of records placed on workers
	// (placed.go).
	placing sync.Mutex
}

// handle is one live sandbox: its record (guarded by mu), the run
// service's sandbox and its egress bridge.
type handle struct {
	mu  sync.Mutex
	rec Record
	sb  *runner.Sandbox
	// stop closes what the sandbox holds beside it (its egress bridge).
	stop func()
	// procs are its background processes (their own lock).
	procs processes
	// claim is what it holds of the operator's caps (caps.go; set
	// before it is live, never changed).
	claim *claim
	// secretEnv are its secrets' placeholders, by name (secrets.go).
	secretEnv map[string]string
	// act is when it was last used and what is attached (idle.go; its
	// own lock).
	act activity
	// audit is its audit log (audit.go; set before it is live).
	audit *auditLog
	// dir, when set, is what to remove when it ends (a pooled sandbox's
	// directory, its workspace inside) instead of the record's
	// workspace.
	dir string
}

// New builds the service over cfg.Records and ends the records of
// sandboxes that were live when the last process stopped: their
// processes died with it, so each is failed with run.interrupted.
func New(cfg Config) (*Service, error) {
	if cfg.Runner == nil || cfg.Records == nil {
		return nil, job.Errorf(job.CodeInvalidRequest, "sessions need the run service and their records")
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	if cfg.DefaultTimeout > cfg.MaxTimeout {
		cfg.DefaultTimeout = cfg.MaxTimeout
	}
	if cfg.MaxIdleTimeout <= 0 {
		cfg.MaxIdleTimeout = cfg.MaxTimeout
	}
	cfg.DefaultIdleTimeout = min(max(cfg.DefaultIdleTimeout, 0), cfg.MaxIdleTimeout)
	if cfg.MaxPaused <= 0 {
		cfg.MaxPaused = DefaultMaxPaused
	}
	if cfg.MaxSandboxes <= 0 {
		cfg.MaxSandboxes = DefaultMaxSandboxes
	}
	if cfg.HostMemoryMB <= 0 {
		cfg.HostMemoryMB = hostMemoryMB()
	}
	if cfg.HostCPUs <= 0 {
		cfg.HostCPUs = hostCPUs()
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := CheckPolicy(cfg.Policy); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, live: map[string]*handle{}, pending: map[*claim]bool{}, isolating: map[string]bool{}}
	for kind, b := range cfg.Backends {
		s.isolating[kind] = b.Capabilities().Isolating
	}
	if err := s.checkTemplates(); err != nil {
		return nil, err
	}
	ids, err := cfg.Records.List()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		rec, err := read(cfg.Records, id)
		// A sandbox placed on a worker lives on with it: the router
		// ends it when its worker is not heard (placed.go).
		if err != nil || !rec.State.Live() || rec.Worker != "" {
			continue
		}
		ended(&rec, StateFailed, s.now(), job.Errorf(job.CodeRunInterrupted, "the sandbox's processes ended with the server that ran them"))
		if err := s.save(rec); err != nil {
			return nil, err
		}
		s.removeWorkspace(id)
	}
	if err := s.startPools(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// save writes rec and publishes its state.
func (s *Service) save(rec Record) error {
	if err := write(s.cfg.Records, rec, s.cfg.Durable); err != nil {
		return err
	}
	s.publish(rec)
	if s.cfg.Saved != nil {
		s.cfg.Saved(rec)
	}
	return nil
}

// Get returns sandbox id's record, a live one with its usage now:
// job.not_found when there is none.
func (s *Service) Get(id string) (Record, error) {
	if h := s.handle(id); h != nil {
		h.mu.Lock()
		rec := h.rec
		h.mu.Unlock()
		if rec.State.Live() {
			rec.Usage = s.usage(h)
		}
		return rec, nil
	}
	return read(s.cfg.Records, id)
}

// Filter selects sandboxes in List: a State (empty: any) and Metadata
// every selected sandbox carries.
type Filter struct {
	State    State
	Metadata map[string]string
}

// List returns the sandboxes f selects, oldest first.
func (s *Service) List(f Filter) ([]Record, error) {
	if f.State != "" && !slices.Contains(States, f.State) {
		return nil, job.Errorf(job.CodeInvalidRequest, "state %q is not a sandbox state", f.State).With("field", "state").With("states", States)
	}
	ids, err := s.cfg.Records.List()
	if err != nil {
		return nil, err
	}
	out := []Record{}
	for _, id := range ids {
		rec, err := s.Get(id)
		if err != nil || (f.State != "" && rec.State != f.State) {
			continue
		}
		match := true
		for k, v := range f.Metadata {
			if got, ok := rec.Metadata[k]; !ok || got != v {
				match = false
			}
		}
		if match {
			out = append(out, rec)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// handle is live sandbox id's handle, or nil.
func (s *Service) handle(id string) *handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id]
}

// handles are the live sandboxes' handles. The service's lock is never
// taken while a handle's is held but in end, so callers lock a handle
// only after handles returns.
func (s *Service) handles() []*handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	hs := make([]*handle, 0, len(s.live))
	for _, h := range s.live {
		hs = append(hs, h)
	}
	return hs
}

// running returns sandbox id's handle, locked, when its state is one of
// ok: job.not_found for an unknown id, session.not_running for one in
// another state (details.state). A call that needs it running wakes a
// sandbox paused for being idle (wake); every call marks it used.
func (s *Service) running(id string, ok ...State) (*handle, error) {
	h := s.handle(id)
	if h == nil {
		rec, err := read(s.cfg.Records, id)
		if err != nil {
			return nil, err
		}
		return nil, notRunning(rec)
	}
	h.mu.Lock()
	s.wake(h, ok)
	for _, st := range ok {
		if h.rec.State == st {
			h.act.touch(s.now())
			return h, nil
		}
	}
	rec := h.rec
	h.mu.Unlock()
	return nil, notRunning(rec)
}

// notRunning is session.not_running for rec.
func notRunning(rec Record) error {
	return job.Errorf(job.CodeSessionNotRunning, "sandbox %s is %s", rec.ID, rec.State).With("id", rec.ID).With("state", string(rec.State))
}
