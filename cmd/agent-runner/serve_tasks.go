package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/agent-runner/agent-runner/door/taskapi"
	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/remote"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/taskevent"
	"github.com/agent-runner/agent-runner/task/taskmetrics"
	"github.com/agent-runner/agent-runner/task/taskremote"
	"github.com/agent-runner/agent-runner/task/taskstore"
)

// mountTasks mounts the agent-task API at /api/v1/tasks: tasks live under
// <store-dir>/tasks, take their place in serve's queue and run on its
// workers (or on agent-runner worker elsewhere), are recovered at start-up
// and pruned hourly by serve's retention (retention.go). f are serve's
// --task-* flags; a shared queue's task records from workers with their
// own store are held to limits (--record-max-bytes). It returns the task
// store, which serve's workers run the tasks they take with and serve's
// retention prunes.
func mountTasks(ctx context.Context, d serveDeps, f taskFlags, limits remote.Limits) (*taskstore.Store, error) {
	metrics := taskmetrics.New(d.Metrics)
	s, err := f.store(ctx, taskDeps{StoreDir: d.StoreDir, Backends: d.Backends, DefaultBackend: d.Backend, UnsafeLocalProcess: d.UnsafeLocalProcess,
		Egress: d.Runner.Config().Egress, Roots: d.Roots, Observer: taskStateEvents(d.Jobs.Queue(), d.Logger, metrics.Observe), Logger: d.Logger, Runner: d.Runner})
	if err != nil {
		return nil, err
	}
	// Tasks take their place in serve's queue; a queue other
	// processes reach (--nats, --nats-listen) has their workers too.
	s.Queue, s.SharedQueue = d.Jobs.Queue(), d.Runner.Config().SharedStore
	if s.SharedQueue {
		// Workers with their own store send their task records and
		// state events here (package remote).
		if err := taskremote.MirrorTasks(ctx, d.Jobs.Queue(), s.Dir, metrics.Observe, limits, d.Logger); err != nil {
			return nil, err
		}
	}
	s.Lifecycle.ChildSocket = taskapi.ChildSocket(s)
	// The tasks serve runs say on the bus what they wrote, so their
	// streams read it at once (taskapi.WithEvents).
	s.Lifecycle.Output = taskevent.Recorder(d.Jobs.Queue())
	if stale := taskapi.CleanStaleSockets(); len(stale) > 0 {
		d.Logger.Info("removed children sockets of a server that died", "dirs", stale)
	}
	if acted, err := s.Recover(); err == nil && len(acted) > 0 {
		d.Logger.Info("recovered agent tasks after a restart", "tasks", acted)
	}
	go func() {
		// Children whose siblings ended on other processes' workers
		// are let go on this tick.
		release := time.NewTicker(2 * time.Second)
		defer release.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-release.C:
				s.ReleaseWaiting()
			}
		}
	}()
	taskapi.Routes(d.Mux, s, d.Auth, taskapi.WithEvents(taskevent.Watcher{Q: d.Jobs.Queue()}))
	return s, nil
}

// taskStateEvents is serve's task observer: next (metrics), then the
// transition on the event bus (taskevent.TypeState), which GET /v1/events
// and the dashboard's lists follow.
func taskStateEvents(q *queue.Queue, log *slog.Logger, next state.Observer) state.Observer {
	return func(from state.State, rec state.Record) {
		next(from, rec)
		if err := taskevent.PublishState(q, rec); err != nil {
			log.Warn("cannot publish a task state event", "task_id", rec.TaskID, "state", rec.State, "error", err)
		}
	}
}
