package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/auth"
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/buildcache"
	"github.com/agent-runner/agent-runner/door/httpapi"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/jobs"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/remote"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/telemetry"
	"github.com/agent-runner/agent-runner/worker"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// serveDeps is what serve's doors beside POST /v1/jobs (agent runs, MCP,
// agent tasks, dashboard) are built from. They register routes on Mux,
// each wrapped with Auth(scope, h); with a token file the root handler
// also refuses any request without a known token (except /health and
// /openapi.json), so a route registered without Auth is still never
// anonymous.
type serveDeps struct {
	Runner   *runner.Runner
	StoreDir string
	Logger   *slog.Logger
	Mux      *http.ServeMux
	// Auth wraps a handler so it runs only for a token holding scope
	// (auth.ScopeSubmit, ScopeRead, ScopeCancel, ScopeAdmin).
	Auth func(scope string, h http.Handler) http.Handler
	// AcceptRawBody lets a door's route take application/octet-stream
	// bodies past the server's guard (httpapi.Server.AcceptRawBody).
	AcceptRawBody func(pattern string)
	// AcceptAnyBody lets a door's route take a body of any type past
	// the guard (httpapi.Server.AcceptAnyBody: the sandbox ports proxy).
	AcceptAnyBody func(pattern string)
	// AuthenticatesItself hands a door its prefix's token and body checks
	// (httpapi.Server.AuthenticatesItself).
	AuthenticatesItself func(prefix string)
	// Metrics is the registry served at /metrics.
	Metrics prometheus.Registerer
	// Jobs is the jobs service every door submits, reads, follows and
	// cancels queued jobs through (POST /v1/jobs calls it too).
	Jobs *jobs.Service
	// Backend is the default backend kind, probed available at start
	// (--default-backend); doors run on it unless told otherwise.
	Backend string
	// Backends are every backend of this binary, built once with the
	// operator's view; the runner has the enabled ones.
	Backends backend.Set
	// UnsafeLocalProcess is the operator's --unsafe-local-process.
	UnsafeLocalProcess bool
	// Roots are --workspace-root (default: serve's working directory),
	// with the run store excluded: every door that accepts a host path
	// (POST /v1/jobs, /mcp, task repositories, children) holds it to them.
	Roots *workspaceroot.Roots
}

// newServeCmd is agent-runner serve; its flags are serveOptions.
func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API with an embedded NATS JetStream job queue and workers",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return serve(o) },
	}
	o.register(cmd.Flags())
	return cmd
}

func serve(o serveOptions) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return usageError{err}
	}
	if o.idleTimeout <= 0 {
		return usageError{errors.New("--idle-timeout must be positive")}
	}
	for _, name := range o.sharedCaches {
		if !buildcache.ValidName(name) {
			return usageError{fmt.Errorf("--shared-cache %q: not a cache name (^[a-z0-9][a-z0-9._-]{0,63}$)", name)}
		}
	}
	log := telemetry.Logger(os.Stderr, level)
	var tokens *auth.Tokens
	if o.tokenFile != "" {
		t, err := auth.Load(o.tokenFile)
		if err != nil {
			return err
		}
		tokens = t
	} else if !loopback(o.addr) {
		return usageError{errors.New("binding a non-loopback address requires --token-file")}
	}
	natsToken := os.Getenv("AGENT_RUNNER_NATS_TOKEN")
	if err := checkNATSAuth(o, natsToken); err != nil {
		return err
	}
	backends, err := o.view.backends(o.storeDir)
	if err != nil {
		return err
	}
	defaultKind, err := doorBackend(context.Background(), backends, "default-backend", o.defaultBackend, o.unsafeLocal)
	if err != nil {
		return err
	}
	warnUnsafeLocal(log, o.unsafeLocal, defaultKind)
	reg := prometheus.NewRegistry()
	cfg := runner.Config{
		StoreDir: o.storeDir, DefaultBackend: defaultKind, Backends: enabledBackends(backends, o.unsafeLocal),
		Durable: o.durable, Logger: log,
		// Nodes of one queue reachable from other processes share the store.
		SharedStore: o.natsURL != "" || o.natsListen != "",
	}
	images, err := openImages(o.storeDir, o.images)
	if err != nil {
		return err
	}
	cfg.Images = images
	// Alone on its store, serve owns it: it recovers and retains, and a
	// second serve is refused; run, replay and mcp use it beside serve.
	cfg.OwnStore = !cfg.SharedStore
	if err := o.network.runnerConfig(&cfg, log, reg); err != nil {
		return err
	}
	r, err := runner.New(cfg)
	if err != nil {
		return err
	}
	sig, stop := shutdownSignals()
	defer stop()
	ctx := sig.Ctx
	natsToken, natsWorkers, err := natsCredentials(o, r.Store().Dir(), natsToken, log)
	if err != nil {
		return err
	}
	q, err := queue.Open(ctx, queue.Config{URL: o.natsURL, StoreDir: r.Store().Dir(), Capacity: o.capacity, AckWait: o.ackWait, Listen: o.natsListen, Token: natsToken, Workers: natsWorkers, SyncAlways: o.durable})
	if err != nil {
		return err
	}
	defer q.Close()
	var traceOut *os.File
	if o.traceFile != "" {
		if traceOut, err = os.OpenFile(o.traceFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return job.Wrap(job.CodeRunIOFailed, err, "cannot open --trace-file")
		}
		defer traceOut.Close()
	}
	tp, err := telemetry.TracerProvider(writerOrNil(traceOut))
	if err != nil {
		return err
	}
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("agent-runner")
	roots, err := workspaceroot.New(o.workspaceRoots, r.Store().Dir())
	if err != nil {
		return usageError{err}
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	api := httpapi.New(httpapi.Config{
		Runner: r, Queue: q, Logger: log, Tokens: tokens, MaxBodyBytes: o.maxBody,
		RequestTimeout: o.requestTimeout, Registry: reg, Tracer: tracer, WorkspaceRoots: roots,
		ListenAddr: o.addr, AllowedHosts: o.allowedHosts,
	})
	api.Jobs().ShareCaches(o.sharedCaches)
	if o.natsURL == "" && o.natsListen == "" {
		// Only this process submits to its own queue: drop records of
		// submits a crash cut off before they were queued.
		if _, err := api.Jobs().DropUnqueued(ctx); err != nil {
			return err
		}
	}
	if o.natsURL != "" || o.natsListen != "" {
		// Workers with their own store send their records here.
		if err := remote.MirrorJobs(ctx, r, q, remote.Limits{MaxBytes: o.recordMaxBytes}, log); err != nil {
			return err
		}
	}
	// The doors beside POST /v1/jobs, each mounted by a function of its
	// own file (serve_agents.go, serve_mcp.go, serve_tasks.go,
	// serve_sessions.go, serve_images.go, serve_ui.go) before serve listens; ctx ends when it shuts down.
	// The task store that mountTasks returns runs the workers' tasks.
	d := serveDeps{
		Runner: r, StoreDir: r.Store().Dir(), Logger: log, Mux: api.Mux(), Auth: api.Auth, AcceptRawBody: api.AcceptRawBody, AcceptAnyBody: api.AcceptAnyBody,
		Metrics: reg, Jobs: api.Jobs(), Roots: roots, AuthenticatesItself: api.AuthenticatesItself,
		Backend: defaultKind, Backends: backends, UnsafeLocalProcess: o.unsafeLocal,
	}
	agentRuns, err := mountAgents(ctx, d)
	if err != nil {
		return err
	}
	tasks, err := mountTasks(ctx, d, o.tasks, remote.Limits{MaxBytes: o.recordMaxBytes})
	if err != nil {
		return err
	}
	sessions, err := mountSessions(ctx, d, o.sessions, tokens, o.tasks.secretsFile, o.natsURL != "" || o.natsListen != "")
	if err != nil {
		return err
	}
	mountImages(d, images, o.images)
	mountMCP(d, o.mcpAllowShell, tokens, sessions)
	mountE2B(d, o.e2bPrefix, tokens, sessions)
	mountUI(d)
	if o.pprofAddr != "" {
		if !loopback(o.pprofAddr) {
			return usageError{errors.New("--pprof-addr must be a loopback address")}
		}
		go func() { log.Warn("pprof stopped", "error", http.ListenAndServe(o.pprofAddr, pprofMux())) }()
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return job.Wrap(job.CodeRunIOFailed, err, "cannot listen").With("addr", o.addr)
	}
	ln = httpapi.LimitConnsPerIP(ln, o.maxConnsPerIP)
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: o.idleTimeout}
	poolDone := make(chan struct{})
	if o.noWorkers {
		close(poolDone)
	} else {
		m := api.Metrics()
		pool := worker.New(worker.Config{
			Workers: o.workers, Runner: r, Queue: q, Logger: log, Grace: o.shutdownGrace, Tracer: tracer, Admit: admitWorkspace(roots),
			Tasks: tasks, TaskWorkers: o.taskWorkers,
			Abort: sig.Force, Draining: drainingLog(log),
			Started: func(req job.Request, _ int) { m.Started(req.Backend.Kind) },
			Result:  func(res job.Result) { m.Ran(res) },
			Stage:   func(_, stage string, d time.Duration) { m.Stage(stage, d) },
		})
		go func() { pool.Run(ctx); close(poolDone) }()
	}
	// Hourly, remove the build caches no job used for CacheMaxAge
	// (runner.New collected once at start).
	go r.CollectCachesEvery(ctx, time.Hour)
	// Now and hourly, the store's one retention for every kind: old job
	// runs (and unused overlay layers), agent tasks, capability runs.
	go retainEvery(ctx, time.Hour, log,
		retention{"job", func(now time.Time) ([]string, error) { return r.Retain(now, runner.DefaultRetention) }},
		retention{"task", func(now time.Time) ([]string, error) { return tasks.Retain(now), nil }},
		retention{"agent_run", agentRuns.Retain},
		retention{"session", sessions.Retain})
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		go func() {
			select {
			case <-sig.Force:
				cancel()
			case <-sctx.Done():
			}
		}()
		srv.Shutdown(sctx)
	}()
	log.Info("serving", "addr", ln.Addr().String(), "store_dir", r.Store().Dir(), "workers", o.workers, "queue_capacity", o.capacity, "auth", tokens != nil,
		"default_backend", defaultKind, "backends", r.Config().Backends)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return job.Wrap(job.CodeRunIOFailed, err, "server failed")
	}
	<-poolDone
	// Kept sandboxes end with the server that holds them.
	sessions.Close()
	if sig.Forced() {
		return forcedError()
	}
	log.Info("stopped")
	return nil
}

func pprofMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	return m
}

func writerOrNil(f *os.File) interface{ Write([]byte) (int, error) } {
	if f == nil {
		return nil
	}
	return f
}

// loopback reports whether addr binds only a loopback interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
