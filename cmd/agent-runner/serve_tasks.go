package main

import (
	"context"
	"path/filepath"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/taskapi"
	"github.com/agent-runner/agent-runner/task/taskmetrics"
	"github.com/agent-runner/agent-runner/task/taskstore"
	"github.com/agent-runner/agent-runner/validation"
)

// serve mounts the agent-task API at /api/v1/tasks: tasks live under
// <store-dir>/tasks, are recovered at start-up and pruned hourly.
func init() {
	var taskBackend string
	var allowHost bool
	var hang, heartbeat time.Duration
	serveCmd.Flags().StringVar(&taskBackend, "task-backend", "linux_sandbox", "backend agent tasks run on (falls back to local_process when linux_sandbox is unavailable)")
	serveCmd.Flags().BoolVar(&allowHost, "task-allow-host-network", false, "let tasks whose vm.network_mode needs egress use the host network")
	serveCmd.Flags().DurationVar(&hang, "task-hang-timeout", 30*time.Minute, "end a task whose agent printed nothing for this long")
	serveCmd.Flags().DurationVar(&heartbeat, "task-heartbeat", 30*time.Second, "how often a running task's progress, CPU and memory are recorded (outbox/progress/metrics.jsonl)")
	serveMounts = append(serveMounts, func(ctx context.Context, d serveDeps) error {
		b, ok := backend.Lookup(validation.NormalizeKind(taskBackend))
		if !ok || b.Available(ctx) != nil {
			b, _ = backend.Lookup("local_process")
			d.Logger.Warn("task backend unavailable; agent tasks run on local_process", "requested", taskBackend)
		}
		metrics := taskmetrics.New(d.Metrics)
		s, err := taskstore.New(filepath.Join(d.StoreDir, "tasks"), lifecycle.Config{Backend: b, AllowHostNetwork: allowHost, HangTimeout: hang, HeartbeatEvery: heartbeat, Observer: metrics.Observe})
		if err != nil {
			return err
		}
		s.Lifecycle.ChildSocket = taskapi.ChildSocket(s)
		if stale := taskapi.CleanStaleSockets(); len(stale) > 0 {
			d.Logger.Info("removed children sockets of a server that died", "dirs", stale)
		}
		if acted, err := s.Recover(); err == nil && len(acted) > 0 {
			d.Logger.Info("recovered agent tasks after a restart", "tasks", acted)
		}
		go func() {
			t := time.NewTicker(time.Hour)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-t.C:
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
