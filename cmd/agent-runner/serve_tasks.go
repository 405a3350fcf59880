package main

import (
	"context"
	"path/filepath"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/secretfile"
	"github.com/agent-runner/agent-runner/task/lifecycle"
	"github.com/agent-runner/agent-runner/task/taskapi"
	"github.com/agent-runner/agent-runner/task/taskmetrics"
	"github.com/agent-runner/agent-runner/task/taskstore"
)

// serve mounts the agent-task API at /api/v1/tasks: tasks live under
// <store-dir>/tasks, are recovered at start-up and pruned hourly.
func init() {
	var taskBackend string
	var allowHost bool
	var hang, heartbeat time.Duration
	var secretsFile string
	serveCmd.Flags().StringVar(&taskBackend, "task-backend", "", "backend agent tasks run on (default: --default-backend); serve refuses to start when it is unavailable")
	serveCmd.Flags().BoolVar(&allowHost, "task-allow-host-network", false, "let tasks whose vm.network_mode needs egress use the host network")
	serveCmd.Flags().DurationVar(&hang, "task-hang-timeout", 30*time.Minute, "end a task whose agent printed nothing for this long")
	serveCmd.Flags().DurationVar(&heartbeat, "task-heartbeat", 30*time.Second, "how often a running task's progress, CPU and memory are recorded (outbox/progress/metrics.jsonl)")
	serveCmd.Flags().StringVar(&secretsFile, "secrets-file", "", "the only secrets agent tasks may name (YAML: secrets: {NAME: {env: VAR} | {file: PATH}}); without it a task asking for a secret is refused")
	serveMounts = append(serveMounts, func(ctx context.Context, d serveDeps) error {
		var secrets *secretfile.File
		if secretsFile != "" {
			var err error
			if secrets, err = secretfile.Load(secretsFile); err != nil {
				return usageError{err}
			}
		}
		b, err := taskBackendFor(ctx, taskBackend, d)
		if err != nil {
			return err
		}
		metrics := taskmetrics.New(d.Metrics)
		s, err := taskstore.New(filepath.Join(d.StoreDir, "tasks"), lifecycle.Config{Backend: b, AllowHostNetwork: allowHost, Egress: d.Runner.Config().Egress, HangTimeout: hang, HeartbeatEvery: heartbeat, Observer: metrics.Observe,
			Secrets: secrets, Roots: d.Roots})
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

// taskBackendFor is the backend tasks run on: --task-backend, checked and
// probed at start like --default-backend, or else serve's default backend.
// A task that finds it unavailable later ends backend.unavailable
// (lifecycle probes before every run); there is no fallback.
func taskBackendFor(ctx context.Context, flagValue string, d serveDeps) (backend.Backend, error) {
	kind := d.Backend
	if flagValue != "" {
		k, err := doorBackend(ctx, d.Backends, "task-backend", flagValue, d.UnsafeLocalProcess)
		if err != nil {
			return nil, err
		}
		kind = k
	}
	b, ok := d.Backends[kind]
	if !ok {
		return nil, job.Errorf(job.CodeBackendUnavail, "task backend %s is not built into this binary", kind).With("backend", kind)
	}
	return b, nil
}
