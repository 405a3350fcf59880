package main

import (
	"context"
	"path/filepath"

	"github.com/agent-runner/agent-runner/agent/runs"
	"github.com/agent-runner/agent-runner/door/agentapi"
	"github.com/agent-runner/agent-runner/store"
)

// mountAgents mounts the capability-runs API at /v1/agent-runs: a scripted
// task or a mock-agent run launched from a manifest, run in the background
// with its subprocess tools as processes of one sandbox of serve's run
// service on --default-backend, on this host,
// recorded in the store under <store-dir>/agent-runs/<run_id>/
// (docs/agents.md), its progress published on serve's event bus (GET
// /v1/events). Manifest roots must lie under --workspace-root. It returns
// the capability-run service, whose retention serve runs with the others.
func mountAgents(ctx context.Context, d serveDeps) (*runs.Service, error) {
	s, err := runs.New(ctx, runs.Config{
		Dir: filepath.Join(d.StoreDir, store.CapabilityRuns.Dir), Runner: d.Runner,
		Backend: d.Backend, Roots: d.Roots, Events: d.Jobs.Queue(), Logger: d.Logger,
	})
	if err != nil {
		return nil, err
	}
	agentapi.Routes(d.Mux, s, d.Auth)
	// A job's workspace may not overlap a run's live write roots.
	d.Jobs.Hold(s.HoldsWorkspace)
	return s, nil
}
