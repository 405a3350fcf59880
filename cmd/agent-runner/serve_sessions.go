package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/door/sessionapi/sessionremote"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/secretfile"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// sessionFlags are the --sandbox-* flags and --max-sandboxes of serve
// and worker (a session service's), and serve's flags of sandboxes on
// remote workers.
type sessionFlags struct {
	defaultTimeout, maxTimeout   time.Duration
	defaultIdle, maxIdle         time.Duration
	maxPaused                    time.Duration
	max, maxPerToken             int
	memOvercommit, cpuOvercommit float64
	maxFileBytes                 int64
	policyFile                   string
	templatesFile                string
	poolRefillDelay              time.Duration
	// noLocal is serve's --no-local-sandboxes, workerTimeout its
	// --sandbox-worker-timeout.
	noLocal       bool
	workerTimeout time.Duration
}

func (f *sessionFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.defaultTimeout, "sandbox-default-timeout", session.DefaultTimeout, "timeout of a kept sandbox (POST /v1/sandboxes) that sets no timeout_s")
	fs.DurationVar(&f.maxTimeout, "sandbox-max-timeout", session.DefaultMaxTimeout, "the most timeout_s a kept sandbox may set")
	fs.DurationVar(&f.defaultIdle, "sandbox-default-idle-timeout", 0, "idle timeout of a kept sandbox that sets no idle_timeout_s (0: never idle); idle, it is paused with auto_pause, else ends expired")
	fs.DurationVar(&f.maxIdle, "sandbox-max-idle-timeout", 0, "the most idle_timeout_s a kept sandbox may set (default: --sandbox-max-timeout)")
	fs.DurationVar(&f.maxPaused, "sandbox-max-paused", session.DefaultMaxPaused, "how long a kept sandbox created with on_timeout pause is held paused after its timeout before it ends expired (end_reason paused_too_long)")
	fs.IntVar(&f.max, "max-sandboxes", session.DefaultMaxSandboxes, "most kept sandboxes alive at once in this process; beyond it a create answers 429 session.limit_reached")
	fs.IntVar(&f.maxPerToken, "max-sandboxes-per-token", 0, "most kept sandboxes alive at once created by one token (its name; 0: only --max-sandboxes)")
	fs.Float64Var(&f.memOvercommit, "sandbox-memory-overcommit", 0, "when positive, the live sandboxes' memory_mb together stay within the host's memory times this ratio (0: no cap)")
	fs.Float64Var(&f.cpuOvercommit, "sandbox-cpu-overcommit", 0, "when positive, the live sandboxes' cpu_count together stay within the host's CPUs times this ratio (0: no cap)")
	fs.Int64Var(&f.maxFileBytes, "sandbox-max-file-bytes", session.DefaultMaxFileBytes, "most bytes one sandbox file read or write may carry")
	fs.StringVar(&f.templatesFile, "sandbox-templates", "", "named sandbox templates (JSON or YAML: name -> backend, limits, policy, network, env, timeout_s, pool); a create naming one takes its defaults, and a template with a pool keeps that many sandboxes created and frozen for creates to claim (docs/sessions.md)")
	fs.DurationVar(&f.poolRefillDelay, "sandbox-pool-refill-delay", 0, "how long the warm pools wait after a claim before they refill (0: at once)")
	fs.StringVar(&f.policyFile, "sandbox-policy", "", "the policy of every exec in a kept sandbox created without one (a job policy in JSON or YAML: allowed_commands, allowed_env, allow_shell; see docs/sessions.md); default: any program inside the sandbox's view")
}

// registerServe declares serve's flags of sandboxes on remote workers.
func (f *sessionFlags) registerServe(fs *pflag.FlagSet) {
	fs.BoolVar(&f.noLocal, "no-local-sandboxes", false, "with --nats or --nats-listen: host no kept sandboxes in this process; every create goes to a remote worker (agent-runner worker)")
	fs.DurationVar(&f.workerTimeout, "sandbox-worker-timeout", sessionremote.DefaultLostAfter, "a remote worker not heard this long is lost: its sandboxes end failed with session.worker_lost (at least 2s)")
}

// sessionDeps are what a session service is built from (serve's and a
// worker's).
type sessionDeps struct {
	Runner             *runner.Runner
	StoreDir           string
	Backends           backend.Set
	DefaultBackend     string
	UnsafeLocalProcess bool
	Roots              *workspaceroot.Roots
	// SecretsFile is --secrets-file (the agent tasks' too).
	SecretsFile string
	Events      session.Publisher
	Feed        session.Feed
	Saved       func(session.Record)
	Recorded    func(runID string)
	Logger      *slog.Logger
}

// newSessionService builds the session service over <store>/sessions,
// ending the records of sandboxes that died with the last process.
func newSessionService(d sessionDeps, f sessionFlags) (*session.Service, error) {
	if f.maxPerToken < 0 || f.memOvercommit < 0 || f.cpuOvercommit < 0 || f.maxPaused < 0 {
		return nil, usageError{errors.New("--max-sandboxes-per-token, --sandbox-memory-overcommit, --sandbox-cpu-overcommit and --sandbox-max-paused must not be negative")}
	}
	recs, err := store.OpenRecords(filepath.Join(d.StoreDir, store.Sessions.Dir), store.Sessions)
	if err != nil {
		return nil, err
	}
	var secrets *secretfile.File
	if d.SecretsFile != "" {
		if secrets, err = secretfile.Load(d.SecretsFile); err != nil {
			return nil, usageError{err}
		}
	}
	var pol *job.Policy
	if f.policyFile != "" {
		if pol, err = loadSandboxPolicy(f.policyFile); err != nil {
			return nil, usageError{err}
		}
	}
	var templates map[string]session.Template
	if f.templatesFile != "" {
		if templates, err = loadSandboxTemplates(f.templatesFile); err != nil {
			return nil, usageError{err}
		}
	}
	rc := d.Runner.Config()
	return session.New(session.Config{
		Runner: d.Runner, Records: recs, Backends: enabledBackends(d.Backends, d.UnsafeLocalProcess), DefaultBackend: d.DefaultBackend,
		UnsafeLocalProcess: d.UnsafeLocalProcess, Roots: d.Roots, Max: rc.Max, Defaults: rc.Defaults,
		DefaultTimeout: f.defaultTimeout, MaxTimeout: f.maxTimeout, MaxSandboxes: f.max, MaxFileBytes: f.maxFileBytes,
		DefaultIdleTimeout: f.defaultIdle, MaxIdleTimeout: f.maxIdle, MaxPaused: f.maxPaused,
		MaxPerOwner: f.maxPerToken, MemoryOvercommit: f.memOvercommit, CPUOvercommit: f.cpuOvercommit,
		Egress: rc.Egress, AllowHostNetwork: rc.AllowHostNetwork,
		Secrets: secrets, Policy: pol, Events: d.Events, Feed: d.Feed, Saved: d.Saved, Recorded: d.Recorded,
		Logger: d.Logger.WithGroup("session"), Durable: rc.Durable,
		Templates: templates, PoolRefillDelay: f.poolRefillDelay,
	})
}

// mountSessions mounts the sessions API at /v1/sandboxes (docs/sessions.md):
// kept sandboxes on the run service, recorded under
// <store-dir>/sessions/<id>/, on --default-backend unless a create names
// another enabled one, their workspaces copied from under
// --workspace-root, their state changes on serve's event bus, each
// create counted against its token (tokens) and its secrets taken from
// the secrets file (--secrets-file, the agent tasks' too). The reaper
// ends expired sandboxes (or pauses them: on_timeout pause, held for
// --sandbox-max-paused), and pauses or ends idle ones, every second
// until ctx ends. acrossHosts (--nats or --nats-listen) adds remote
// workers: creates are placed on them or here, and every call for a
// sandbox on a worker is routed there (sessionremote; docs/sessions.md
// "Across hosts"). It returns the service: serve runs its retention with
// the others, and Closes it once it stopped serving (every live sandbox
// of this process is deleted, recorded failed).
func mountSessions(ctx context.Context, d serveDeps, f sessionFlags, tokens *auth.Tokens, secretsFile string, acrossHosts bool) (*session.Service, error) {
	if f.noLocal && !acrossHosts {
		return nil, usageError{errors.New("--no-local-sandboxes needs --nats or --nats-listen (sandboxes then live on remote workers)")}
	}
	s, err := newSessionService(sessionDeps{Runner: d.Runner, StoreDir: d.StoreDir, Backends: d.Backends, DefaultBackend: d.Backend,
		UnsafeLocalProcess: d.UnsafeLocalProcess, Roots: d.Roots, SecretsFile: secretsFile, Events: d.Jobs.Queue(), Feed: d.Jobs.Queue(), Logger: d.Logger}, f)
	if err != nil {
		return nil, err
	}
	waitPools(ctx, s, d.Logger)
	go s.ReapEvery(ctx, time.Second)
	wrap := ownedAuth(d.Auth, tokens)
	if acrossHosts {
		router, err := sessionremote.NewRouter(sessionremote.RouterConfig{
			Conn: d.Jobs.Queue().Conn(), Service: s, Local: !f.noLocal,
			LocalBackends: enabledBackends(d.Backends, d.UnsafeLocalProcess).Kinds(), LostAfter: f.workerTimeout,
			Claim: claimSandboxRun(d), Logger: d.Logger.WithGroup("session"),
		})
		if err != nil {
			return nil, err
		}
		go func() {
			router.Run(ctx)
			router.Close()
		}()
		owned := wrap
		wrap = func(scope string, h http.Handler) http.Handler { return owned(scope, router.Wrap(h)) }
	}
	sessionapi.Routes(d.Mux, s, wrap)
	for _, p := range sessionapi.RawBodyPatterns() {
		d.AcceptRawBody(p)
	}
	for _, p := range sessionapi.AnyBodyPatterns() {
		d.AcceptAnyBody(p)
	}
	return s, nil
}

// claimSandboxRun binds an exec or process run of a sandbox on a remote
// worker to that worker, so its record (sent as a job's: remote's
// mirror) lands in this node's runs/ like a local sandbox's. A run id
// this node already has a record of is refused.
func claimSandboxRun(d serveDeps) func(ctx context.Context, worker, runID string) error {
	return func(ctx context.Context, worker, runID string) error {
		if _, err := os.Lstat(d.Runner.Store().RunDir(runID)); err == nil {
			return job.Errorf(job.CodeJobConflict, "run %s is recorded here already", runID).With("id", runID)
		}
		return d.Jobs.Queue().Claim(ctx, worker, queue.ClaimJob, runID, 1)
	}
}

// ownedAuth is serve's Auth with the caller's token identity (tokenOwner)
// on the request's context, which the session service counts a create
// against (--max-sandboxes-per-token).
func ownedAuth(authz func(string, http.Handler) http.Handler, tokens *auth.Tokens) func(string, http.Handler) http.Handler {
	return func(scope string, h http.Handler) http.Handler {
		return authz(scope, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(session.WithOwner(r.Context(), tokenOwner(tokens, r))))
		}))
	}
}

// tokenOwner names the token of an authorized request: its name in the
// token file, else the digest of the token (as the file holds it), so
// two unnamed tokens are two owners; "" without tokens (loopback: every
// caller is one owner).
func tokenOwner(tokens *auth.Tokens, r *http.Request) string {
	if tokens == nil {
		return ""
	}
	if name, err := tokens.Authenticate(r); err == nil && name != "" {
		return name
	}
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return auth.Hash(bearer)
}
