package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/agent-runner/agent-runner/door/e2bapi"
	"github.com/agent-runner/agent-runner/door/httpapi"
	"github.com/agent-runner/agent-runner/remote"
)

// serveOptions are serve's flags, every one declared in register: the
// HTTP API and queue's, then those of the doors serve mounts beside it
// (MCP, agent tasks) and of remote workers.
type serveOptions struct {
	addr, storeDir, natsURL, natsListen, tokenFile, defaultBackend, logLevel, traceFile, pprofAddr string
	capacity                                                                                       int64
	workers, taskWorkers                                                                           int
	maxBody                                                                                        int64
	requestTimeout, shutdownGrace, ackWait                                                         time.Duration
	durable, noWorkers, unsafeLocal                                                                bool
	workspaceRoots                                                                                 []string
	allowedHosts                                                                                   []string
	sharedCaches                                                                                   []string
	idleTimeout                                                                                    time.Duration
	maxConnsPerIP                                                                                  int
	network                                                                                        egressFlags
	view                                                                                           sandboxFlags

	// mcpAllowShell is --mcp-allow-shell (mountMCP).
	mcpAllowShell bool
	// e2bPrefix is --e2b-prefix (mountE2B).
	e2bPrefix string
	// sessions are the --sandbox-* flags and --max-sandboxes
	// (mountSessions).
	sessions sessionFlags
	// tasks are the --task-* flags and --secrets-file (mountTasks).
	tasks taskFlags
	// recordMaxBytes is --record-max-bytes: the most one record from a
	// remote worker may carry.
	recordMaxBytes int64
	// images are --images-dir and --image-max-bytes (mountImages).
	images imageServeFlags
	// natsWorkersFile is --nats-workers: the worker credentials the
	// embedded server's listener accepts (queue.LoadWorkers).
	natsWorkersFile string
}

// register declares serve's flags on f, with their defaults.
func (o *serveOptions) register(f *pflag.FlagSet) {
	o.network.register(f)
	o.view.register(f)
	f.StringVar(&o.addr, "addr", "127.0.0.1:3000", "listen address; anything but loopback requires --token-file")
	f.StringVar(&o.storeDir, "store-dir", "./agent-runner-runs", "run store (and embedded NATS data) directory")
	f.Int64Var(&o.capacity, "queue-capacity", 1024, "most jobs queued or running at once; beyond it POST /v1/jobs answers 503")
	f.IntVar(&o.workers, "workers", 2, "jobs run concurrently by this process")
	f.IntVar(&o.taskWorkers, "task-workers", 4, "agent tasks run concurrently by this process (slots of their own: tasks never hold up jobs)")
	f.BoolVar(&o.noWorkers, "no-workers", false, "accept jobs but run none here (workers run elsewhere: agent-runner worker --nats URL)")
	f.StringVar(&o.natsURL, "nats", "", "external NATS server URL (default: embedded, in-process)")
	f.StringVar(&o.natsListen, "nats-listen", "", "also expose the embedded NATS server on host:port (for remote workers); clients need AGENT_RUNNER_NATS_TOKEN, a --nats-workers token, or (loopback) the token generated in <store-dir>/nats/token")
	f.StringVar(&o.tokenFile, "token-file", "", "bearer token file (lines: sha256:<hex> scopes [name])")
	f.Int64Var(&o.maxBody, "max-body-bytes", 1<<20, "request body limit")
	f.DurationVar(&o.requestTimeout, "request-timeout", 30*time.Second, "timeout of non-streaming requests")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long running jobs may finish before the process exits (they run again after restart)")
	f.DurationVar(&o.ackWait, "ack-wait", 10*time.Second, "redelivery timeout of a job whose worker stopped responding")
	f.BoolVar(&o.durable, "durable", false, "fsync every result.json and every queued job (power-loss safe records and queue)")
	f.StringVar(&o.defaultBackend, "default-backend", isolatingDefault, "backend for requests that name none (and for MCP and tasks); serve refuses to start when it is unavailable")
	f.BoolVar(&o.unsafeLocal, unsafeLocalFlag, false, unsafeLocalHelp)
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.traceFile, "trace-file", "", "write OpenTelemetry spans as JSON lines to this file")
	f.StringVar(&o.pprofAddr, "pprof-addr", "", "serve Go profiles (net/http/pprof) on this loopback host:port")
	f.StringArrayVar(&o.workspaceRoots, "workspace-root", nil, "directory under which submitted workspaces, MCP workspaces and task repositories must lie (repeatable; default: the working directory; the store is always refused)")
	f.StringArrayVar(&o.allowedHosts, "allowed-host", nil, "a host name (any port) or host:port clients reach serve by, besides loopback's and --addr's: requests naming another Host are refused, and a browser Origin must be serve's own or one of these (repeatable)")
	f.StringArrayVar(&o.sharedCaches, "shared-cache", nil, "a workspace.caches name shared by every caller (repeatable); any other cache belongs to the caller's token, so two tokens naming it get two caches. A shared cache is writable by every caller: share only caches whose entries you trust any of them to write")
	f.DurationVar(&o.idleTimeout, "idle-timeout", 60*time.Second, "close a keep-alive connection idle this long")
	f.IntVar(&o.maxConnsPerIP, "max-conns-per-ip", httpapi.DefaultMaxConnsPerIP, "most open connections from one client IP; further ones are closed on accept (0: no limit)")

	f.BoolVar(&o.mcpAllowShell, "mcp-allow-shell", false, "let MCP sandbox.run name a shell")
	f.StringVar(&o.e2bPrefix, "e2b-prefix", e2bapi.DefaultPrefix, "path of the E2B-compatible API (docs/e2b.md): E2B_API_URL and E2B_SANDBOX_URL are serve's URL with it; empty: not served")
	o.tasks.register(f, "serve")
	o.sessions.register(f)
	o.sessions.registerServe(f)
	o.images.register(f)
	f.Int64Var(&o.recordMaxBytes, "record-max-bytes", remote.DefaultMaxBytes,
		"with --nats or --nats-listen: the most bytes one job or task record from a worker with its own store may carry here (larger records end the job or task run.io_failed)")
	f.StringVar(&o.natsWorkersFile, "nats-workers", "",
		"with --nats-listen: worker credentials file (lines: sha256:<hex of the worker's token> <worker-name>); each worker may only take jobs and send records in its own name")
}
