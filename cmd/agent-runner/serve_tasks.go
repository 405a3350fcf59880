package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/agent-runner/agent-runner/queue"
	"github.com/agent-runner/agent-runner/task/state"
	"github.com/agent-runner/agent-runner/task/taskapi"
	"github.com/agent-runner/agent-runner/task/taskmetrics"
)

// serve mounts the agent-task API at /api/v1/tasks: tasks live under
// <store-dir>/tasks, take their place in serve's queue and run on its
// workers (or on agent-runner worker elsewhere), are recovered at start-up
// and pruned hourly.
func init() {
	var f taskFlags
	f.register(serveCmd.Flags(), "serve")
	serveMounts = append(serveMounts, func(ctx context.Context, d serveDeps) error {
		metrics := taskmetrics.New(d.Metrics)
		s, err := f.store(ctx, taskDeps{StoreDir: d.StoreDir, Backends: d.Backends, DefaultBackend: d.Backend, UnsafeLocalProcess: d.UnsafeLocalProcess,
			Egress: d.Runner.Config().Egress, Roots: d.Roots, Observer: taskStateEvents(d.Jobs.Queue(), d.Logger, metrics.Observe), Logger: d.Logger})
		if err != nil {
			return err
		}
		// Tasks take their place in serve's queue; a queue other
		// processes reach (--nats, --nats-listen) has their workers too.
		s.Queue, s.SharedQueue = d.Jobs.Queue(), d.Runner.Config().SharedStore
		if s.SharedQueue {
			// Workers with their own store send their task records here.
			if err := mirrorTasks(ctx, s, d.Jobs.Queue(), metrics.Observe, d.Logger); err != nil {
				return err
			}
		}
		d.RunTasks(s)
		s.Lifecycle.ChildSocket = taskapi.ChildSocket(s)
		if stale := taskapi.CleanStaleSockets(); len(stale) > 0 {
			d.Logger.Info("removed children sockets of a server that died", "dirs", stale)
		}
		if acted, err := s.Recover(); err == nil && len(acted) > 0 {
			d.Logger.Info("recovered agent tasks after a restart", "tasks", acted)
		}
		go func() {
			retain := time.NewTicker(time.Hour)
			defer retain.Stop()
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
				case now := <-retain.C:
					if removed := s.Retain(now); len(removed) > 0 {
						d.Logger.Info("retention removed agent tasks", "tasks", removed)
					}
				}
			}
		}()
		taskapi.Routes(d.Mux, s, d.Auth)
		return nil
	})
}

// taskStateEvents is serve's task observer: next (metrics), then the
// transition on the event bus (ar.taskevents.<id>), which GET /v1/events
// and the dashboard's lists follow.
func taskStateEvents(q *queue.Queue, log *slog.Logger, next state.Observer) state.Observer {
	return func(from state.State, rec state.Record) {
		next(from, rec)
		if err := q.PublishTaskEvent(queue.Event{TaskID: rec.TaskID, State: string(rec.State), Time: rec.LastCheckpoint}); err != nil {
			log.Warn("cannot publish a task state event", "task_id", rec.TaskID, "state", rec.State, "error", err)
		}
	}
}
