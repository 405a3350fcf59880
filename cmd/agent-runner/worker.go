package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/door/sessionapi/sessionremote"
	"github.com/agent-runner/agent-runner/door/taskapi"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/remote"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/task/taskremote"
	"github.com/agent-runner/agent-runner/telemetry"
	"github.com/agent-runner/agent-runner/worker"
	"github.com/agent-runner/agent-runner/workspaceroot"
)

// admitWorkspace is a worker's check of a pulled job: its workspace lies
// under roots (serve's and the API node's check, done again where the
// job runs; a NATS client that forges a message reaches no further).
func admitWorkspace(roots *workspaceroot.Roots) func(queue.Message) error {
	return func(msg queue.Message) error {
		_, err := roots.Check(msg.Request.Workspace.Path)
		return err
	}
}

// newWorkerCmd is `agent-runner worker`.
func newWorkerCmd() *cobra.Command {
	var natsURL, tokenFile, storeDir, defaultBackend, logLevel string
	var workers int
	var grace time.Duration
	var durable, unsafeLocal bool
	var workspaceRoots []string
	var network egressFlags
	var view sandboxFlags
	var tasks taskFlags
	var taskWorkers int
	var sessions sessionFlags
	var noSandboxes bool
	cmd := &cobra.Command{
		Use:   "worker --nats URL",
		Short: "Run queued jobs and agent tasks from a serve node's NATS JetStream queue (no HTTP)",
		Long: "worker joins the job queue that `serve --nats URL` or `serve --nats-listen ADDR`\n" +
			"created, pulls jobs and runs them, writing run records under --store-dir\n" +
			"(and agent tasks, whose whole lifecycle runs here, under --store-dir/tasks)\n" +
			"and sending each finished record to the API node over NATS (no shared\n" +
			"filesystem needed; the job is acknowledged once it arrived). It hears cancel\n" +
			"requests; on SIGTERM it stops pulling and lets running jobs finish within\n" +
			"--shutdown-grace; jobs still running then, or at a second signal, are\n" +
			"killed and run again after restart.\n" +
			"The NATS token comes from --nats-token-file (a 0600 file: the API node's\n" +
			"<store-dir>/nats/token on the same host, or this worker's own token listed\n" +
			"in serve --nats-workers) or AGENT_RUNNER_NATS_TOKEN.\n" +
			"It also keeps sandboxes (sessions) that the API node places here, recorded\n" +
			"under --store-dir/sessions: the API node routes every call for them over\n" +
			"NATS (--no-sandboxes: none).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError{err}
			}
			log := telemetry.Logger(os.Stderr, level)
			backends, err := view.backends(storeDir)
			if err != nil {
				return err
			}
			kind, err := doorBackend(context.Background(), backends, "default-backend", defaultBackend, unsafeLocal)
			if err != nil {
				return err
			}
			warnUnsafeLocal(log, unsafeLocal, kind)
			cfg := runner.Config{StoreDir: storeDir, DefaultBackend: kind, Backends: enabledBackends(backends, unsafeLocal), Durable: durable, Logger: log, SharedStore: true}
			if err := network.runnerConfig(&cfg, log, nil); err != nil {
				return err
			}
			r, err := runner.New(cfg)
			if err != nil {
				return err
			}
			sig, stop := shutdownSignals()
			defer stop()
			ctx := sig.Ctx
			token := os.Getenv("AGENT_RUNNER_NATS_TOKEN")
			if tokenFile != "" {
				if token, err = queue.ReadTokenFile(tokenFile); err != nil {
					return usageError{err}
				}
			}
			q, err := queue.Open(ctx, queue.Config{URL: natsURL, Join: true, Token: token})
			if err != nil {
				return err
			}
			defer q.Close()
			// The record of every finished job goes to the API node over
			// NATS, so the two need no shared store.
			pub, err := remote.NewPublisher(ctx, q.Conn(), remote.PublisherConfig{Logger: log, Worker: q.WorkerID()})
			if err != nil {
				return err
			}
			roots, err := workspaceroot.New(workspaceRoots, r.Store().Dir())
			if err != nil {
				return usageError{err}
			}
			// Agent tasks from the same queue run here too, each whole
			// lifecycle (staging, agent, collection) on this host; their
			// state changes go out live, their record once terminal.
			ts, err := tasks.store(ctx, taskDeps{StoreDir: r.Store().Dir(), Backends: backends, DefaultBackend: kind, UnsafeLocalProcess: unsafeLocal,
				Egress: cfg.Egress, Roots: roots, Observer: taskremote.TaskStates(q, nil), Logger: log, Runner: r})
			if err != nil {
				return err
			}
			// Their output goes out live too, so the API node streams it.
			ts.Lifecycle.Output = taskremote.TaskOutput(q)
			ts.Queue, ts.SharedQueue = q, true
			ts.Lifecycle.ChildSocket = taskapi.ChildSocket(ts)
			if !noSandboxes {
				svc, err := hostSandboxes(ctx, q, sessionDeps{Runner: r, StoreDir: r.Store().Dir(), Backends: backends, DefaultBackend: kind,
					UnsafeLocalProcess: unsafeLocal, Roots: roots, SecretsFile: tasks.secretsFile, Logger: log, Recorded: publishRun(ctx, remote.PublishJob(pub, r.Store()), log)}, sessions)
				if err != nil {
					return err
				}
				// Its sandboxes end with it, recorded failed (the API
				// node hears it).
				defer svc.Close()
			}
			log.Info("worker started", "nats", natsURL, "worker_id", q.WorkerID(), "store_dir", r.Store().Dir(), "workers", workers, "task_workers", taskWorkers, "default_backend", kind, "backends", r.Config().Backends, "workspace_roots", roots.Dirs)
			err = worker.New(worker.Config{Workers: workers, Runner: r, Queue: q, Logger: log, Grace: grace, Admit: admitWorkspace(roots),
				Abort: sig.Force, Draining: drainingLog(log), Recorded: remote.PublishJob(pub, r.Store()),
				Tasks: ts, TaskWorkers: taskWorkers, TaskRecorded: taskremote.PublishTask(pub, ts.Dir)}).Run(ctx)
			if err == nil && sig.Forced() {
				err = forcedError()
			}
			log.Info("worker stopped")
			return err
		},
	}
	f := cmd.Flags()
	network.register(f)
	view.register(f)
	tasks.register(f, "worker")
	f.IntVar(&taskWorkers, "task-workers", 4, "agent tasks run concurrently (slots of their own: tasks never hold up jobs)")
	sessions.register(f)
	f.BoolVar(&noSandboxes, "no-sandboxes", false, "keep no sandboxes here (the API node then places none on this worker)")
	f.StringVar(&natsURL, "nats", "", "NATS server URL of the queue (required)")
	f.StringVar(&tokenFile, "nats-token-file", "", "file holding this worker's NATS token (mode 0600; default: AGENT_RUNNER_NATS_TOKEN)")
	f.StringVar(&storeDir, "store-dir", "./agent-runner-runs", "this worker's run store (the API node gets each finished record over NATS)")
	f.IntVar(&workers, "workers", 2, "jobs run concurrently")
	f.DurationVar(&grace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long running jobs may finish (they run again elsewhere after)")
	f.BoolVar(&durable, "durable", false, "fsync every result.json")
	f.StringVar(&defaultBackend, "default-backend", isolatingDefault, "backend for jobs that name none; worker refuses to start when it is unavailable")
	f.BoolVar(&unsafeLocal, unsafeLocalFlag, false, unsafeLocalHelp+" (a pulled job naming local_process otherwise ends backend_unavailable)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringArrayVar(&workspaceRoots, "workspace-root", nil, "directory under which the workspaces of pulled jobs must lie (repeatable; default: the working directory; the store is always refused)")
	cmd.MarkFlagRequired("nats")
	return cmd
}

// hostSandboxes serves kept sandboxes on this worker: a session service
// over <store>/sessions whose sessions routes the API node reaches over
// NATS (sessionremote.Host), until ctx ends. Their records go to the
// API node as they are written; they are retained here hourly.
func hostSandboxes(ctx context.Context, q *queue.Queue, d sessionDeps, f sessionFlags) (*session.Service, error) {
	host := sessionremote.NewHost(q.Conn(), q.WorkerID(), d.Logger.WithGroup("session"))
	d.Saved = host.Saved
	// Its runs' status events go to the API node, which publishes them.
	d.Events = host
	svc, err := newSessionService(d, f)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	// The API node authorized every call it routes here.
	sessionapi.Routes(mux, svc, func(_ string, h http.Handler) http.Handler { return h })
	go svc.ReapEvery(ctx, time.Second)
	go retainEvery(ctx, time.Hour, d.Logger, retention{"session", svc.Retain})
	go func() {
		if err := host.Run(ctx, svc, mux, enabledBackends(d.Backends, d.UnsafeLocalProcess).Kinds()); err != nil {
			d.Logger.Error("cannot serve kept sandboxes over NATS", "error", err)
		}
	}()
	return svc, nil
}

// publishRun sends the record of a sandbox's exec or process run to the
// API node, as a job's (the API node claimed the run for this worker
// when it forwarded the call), in the background.
func publishRun(ctx context.Context, publish func(context.Context, string) error, log *slog.Logger) func(string) {
	return func(runID string) {
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := publish(ctx, runID); err != nil {
				log.Warn("cannot send a sandbox run's record to the API node", "run_id", runID, "error", err)
			}
		}()
	}
}
