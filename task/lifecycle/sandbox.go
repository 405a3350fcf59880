package lifecycle

import (
	"context"
	"log/slog"

	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
)

// taskSandbox is the one sandbox a task's steps run in: opened after
// staging with what the agent and the patch collection need together
// (the agent's limits, network, egress bridge and mounts; base.git
// read-only and the collection's scratch directory writable), the agent
// runs in it, then the collection, and it is deleted before the task
// ends. Where the backend keeps no sandboxes, or the operator's task
// policy confines execs sandbox-wide (agentstep.SharesSandbox), it stays
// closed and each step runs in a sandbox of its own.
type taskSandbox struct {
	sb      *runner.Sandbox
	scratch *stage.CollectScratch
}

// open opens the sandbox, if the task's steps can share one, and makes
// agent the agent's step in it.
func (b *taskSandbox) open(ctx context.Context, r *runner.Runner, l stage.Layout, t *manifest.Task, cfg Config, agent *agentstep.Config) error {
	if !agentstep.SharesSandbox(cfg.Backend, cfg.Policy) {
		return nil
	}
	sc, err := stage.NewCollectScratch(l)
	if err != nil {
		return err
	}
	ro, rw := sc.Binds()
	sb, err := agentstep.OpenSandbox(ctx, r, l, t, *agent, ro, rw)
	if err != nil {
		sc.Remove(agent.Logger)
		return err
	}
	b.sb, b.scratch, agent.Sandbox = sb, sc, sb
	return nil
}

// collect collects the task's changes: in the sandbox when it is open,
// else in a sandbox of the collection's own.
func (b *taskSandbox) collect(ctx context.Context, r *runner.Runner, l stage.Layout, t *manifest.Task, cfg Config, log *slog.Logger) (stage.Collection, error) {
	if b.sb == nil {
		return stage.CollectOn(ctx, r, l, t, cfg.Backend, cfg.Collect, log)
	}
	return stage.CollectIn(ctx, r, l, t, b.sb, b.scratch, cfg.Collect, log)
}

// close deletes the sandbox, killing what is left in it, and removes
// the collection's scratch directory; more calls do nothing.
func (b *taskSandbox) close(log *slog.Logger) {
	if b.sb == nil {
		return
	}
	if err := b.sb.Close(); err != nil {
		log.Warn("cannot delete the task's sandbox", "sandbox", b.sb.ID(), "error", err)
	}
	b.scratch.Remove(log)
	b.sb, b.scratch = nil, nil
}
