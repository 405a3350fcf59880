package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/door/sessionapi/sessionremote"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/store"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// sessionFlags are the --sandbox-* flags and --max-sandboxes of serve
// and worker (a session service's), and serve's flags of sandboxes on
// remote workers.
type sessionFlags struct {
	defaultTimeout, maxTimeout time.Duration
	max                        int
	maxFileBytes               int64
	policyFile                 string
	// noLocal is serve's --no-local-sandboxes, workerTimeout its
	// --sandbox-worker-timeout.
	noLocal       bool
	workerTimeout time.Duration
}

func (f *sessionFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.defaultTimeout, "sandbox-default-timeout", session.DefaultTimeout, "timeout of a kept sandbox (POST /v1/sandboxes) that sets no timeout_s")
	fs.DurationVar(&f.maxTimeout, "sandbox-max-timeout", session.DefaultMaxTimeout, "the most timeout_s a kept sandbox may set")
	fs.IntVar(&f.max, "max-sandboxes", session.DefaultMaxSandboxes, "most kept sandboxes alive at once in this process; beyond it a create answers 429 session.limit_reached")
	fs.Int64Var(&f.maxFileBytes, "sandbox-max-file-bytes", session.DefaultMaxFileBytes, "most bytes one sandbox file read or write may carry")
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
	Events             session.Publisher
	Saved              func(session.Record)
	Recorded           func(runID string)
	Logger             *slog.Logger
}

// newSessionService builds the session service over <store>/sessions,
// ending the records of sandboxes that died with the last process.
func newSessionService(d sessionDeps, f sessionFlags) (*session.Service, error) {
	recs, err := store.OpenRecords(filepath.Join(d.StoreDir, store.Sessions.Dir), store.Sessions)
	if err != nil {
		return nil, err
	}
	var pol *job.Policy
	if f.policyFile != "" {
		if pol, err = loadSandboxPolicy(f.policyFile); err != nil {
			return nil, usageError{err}
		}
	}
	rc := d.Runner.Config()
	return session.New(session.Config{
		Runner: d.Runner, Records: recs, Backends: enabledBackends(d.Backends, d.UnsafeLocalProcess), DefaultBackend: d.DefaultBackend,
		UnsafeLocalProcess: d.UnsafeLocalProcess, Roots: d.Roots, Max: rc.Max, Defaults: rc.Defaults,
		DefaultTimeout: f.defaultTimeout, MaxTimeout: f.maxTimeout, MaxSandboxes: f.max, MaxFileBytes: f.maxFileBytes,
		Egress: rc.Egress, AllowHostNetwork: rc.AllowHostNetwork,
		Policy: pol, Events: d.Events, Saved: d.Saved, Recorded: d.Recorded, Logger: d.Logger.WithGroup("session"), Durable: rc.Durable,
	})
}

// mountSessions mounts the sessions API at /v1/sandboxes (docs/sessions.md):
// kept sandboxes on the run service, recorded under
// <store-dir>/sessions/<id>/, on --default-backend unless a create names
// another enabled one, their workspaces copied from under
// --workspace-root, their state changes on serve's event bus. The reaper
// ends expired sandboxes every second until ctx ends. acrossHosts
// (--nats or --nats-listen) adds remote workers: creates are placed on
// them or here, and every call for a sandbox on a worker is routed there
// (sessionremote; docs/sessions.md "Across hosts"). It returns the
// service: serve runs its retention with the others, and Closes it once
// it stopped serving (every live sandbox of this process is deleted,
// recorded failed).
func mountSessions(ctx context.Context, d serveDeps, f sessionFlags, acrossHosts bool) (*session.Service, error) {
	if f.noLocal && !acrossHosts {
		return nil, usageError{errors.New("--no-local-sandboxes needs --nats or --nats-listen (sandboxes then live on remote workers)")}
	}
	s, err := newSessionService(sessionDeps{Runner: d.Runner, StoreDir: d.StoreDir, Backends: d.Backends, DefaultBackend: d.Backend,
		UnsafeLocalProcess: d.UnsafeLocalProcess, Roots: d.Roots, Events: d.Jobs.Queue(), Logger: d.Logger}, f)
	if err != nil {
		return nil, err
	}
	go s.ReapEvery(ctx, time.Second)
	wrap := d.Auth
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
		wrap = func(scope string, h http.Handler) http.Handler { return d.Auth(scope, router.Wrap(h)) }
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
