package main

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"

	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/remote"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/taskstore"
)

// recordMaxBytes is serve's --record-max-bytes: the most one record from
// a remote worker may carry.
var recordMaxBytes int64

// natsWorkersFile is serve's --nats-workers: the worker credentials the
// embedded server's listener accepts (queue.LoadWorkers).
var natsWorkersFile string

func init() {
	serveCmd.Flags().Int64Var(&recordMaxBytes, "record-max-bytes", remote.DefaultMaxBytes,
		"with --nats or --nats-listen: the most bytes one job or task record from a worker with its own store may carry here (larger records end the job or task run.io_failed)")
	serveCmd.Flags().StringVar(&natsWorkersFile, "nats-workers", "",
		"with --nats-listen: worker credentials file (lines: sha256:<hex of the worker's token> <worker-name>); each worker may only take jobs and send records in its own name")
}

// checkNATSAuth refuses, before anything starts, a NATS listener that
// would have no credential (token is AGENT_RUNNER_NATS_TOKEN): a loopback
// one gets a generated token (natsCredentials), any other needs the
// variable or --nats-workers.
func checkNATSAuth(o serveOptions, token string) error {
	if natsWorkersFile != "" && o.natsListen == "" {
		return usageError{errors.New("--nats-workers needs --nats-listen (an external NATS server's permissions are its own)")}
	}
	if o.natsListen != "" && !loopback(o.natsListen) && token == "" && natsWorkersFile == "" {
		return usageError{errors.New("exposing NATS on a non-loopback address requires AGENT_RUNNER_NATS_TOKEN or --nats-workers")}
	}
	return nil
}

// natsCredentials are the shared token and the worker credentials of
// the queue. A listener with neither gets a random shared token, kept in
// <store>/nats/token (0600, only this user reads it), which workers on
// this host pass with --nats-token-file.
func natsCredentials(o serveOptions, storeDir, token string, log *slog.Logger) (string, []queue.Worker, error) {
	var workers []queue.Worker
	if natsWorkersFile != "" {
		ws, err := queue.LoadWorkers(natsWorkersFile)
		if err != nil {
			return "", nil, err
		}
		for _, w := range ws {
			log.Info("NATS worker credential", "worker", w.Name, "worker_id", w.ID())
		}
		workers = ws
	}
	if o.natsListen != "" && token == "" && len(workers) == 0 {
		path, generated, err := queue.EnsureTokenFile(filepath.Join(storeDir, "nats"))
		if err != nil {
			return "", nil, err
		}
		log.Info("NATS listener token (full rights): pass it to workers on this host with --nats-token-file", "path", path)
		token = generated
	}
	return token, workers, nil
}

// mirrorRecords starts, for a queue other processes reach, the mirror of
// the records that workers with their own store publish (package remote).
func mirrorRecords(ctx context.Context, r *runner.Runner, q *queue.Queue, log *slog.Logger) error {
	return remote.MirrorJobs(ctx, r, q, remote.Limits{MaxBytes: recordMaxBytes}, log)
}

// mirrorTasks starts, for a queue other processes reach, the mirror of
// agent task records and the follower of task state events from workers
// with their own store, into the task store s; obs hears the transitions
// (metrics).
func mirrorTasks(ctx context.Context, s *taskstore.Store, q *queue.Queue, obs state.Observer, log *slog.Logger) error {
	return remote.MirrorTasks(ctx, q, s.Dir, obs, remote.Limits{MaxBytes: recordMaxBytes}, log)
}
