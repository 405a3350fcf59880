package main

import (
	"context"
	"log/slog"

	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/remote"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/taskstore"
)

// recordMaxBytes is serve's --record-max-bytes: the most one record from
// a remote worker may carry.
var recordMaxBytes int64

func init() {
	serveCmd.Flags().Int64Var(&recordMaxBytes, "record-max-bytes", remote.DefaultMaxBytes,
		"with --nats or --nats-listen: the most bytes one job or task record from a worker with its own store may carry here (larger records end the job or task run.io_failed)")
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
