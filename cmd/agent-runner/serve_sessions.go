package main

import (
	"context"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/agent-runner/agent-runner/door/sessionapi"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
	"github.com/agent-runner/agent-runner/store"
)

// sessionFlags are serve's --sandbox-* flags (mountSessions).
type sessionFlags struct {
	defaultTimeout, maxTimeout time.Duration
	max                        int
	maxFileBytes               int64
	policyFile                 string
	templatesFile              string
	poolRefillDelay            time.Duration
}

func (f *sessionFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.defaultTimeout, "sandbox-default-timeout", session.DefaultTimeout, "timeout of a kept sandbox (POST /v1/sandboxes) that sets no timeout_s")
	fs.DurationVar(&f.maxTimeout, "sandbox-max-timeout", session.DefaultMaxTimeout, "the most timeout_s a kept sandbox may set")
	fs.IntVar(&f.max, "max-sandboxes", session.DefaultMaxSandboxes, "most kept sandboxes alive at once; beyond it a create answers 429 session.limit_reached")
	fs.Int64Var(&f.maxFileBytes, "sandbox-max-file-bytes", session.DefaultMaxFileBytes, "most bytes one sandbox file read or write may carry")
	fs.StringVar(&f.templatesFile, "sandbox-templates", "", "named sandbox templates (JSON or YAML: name -> backend, limits, policy, network, env, timeout_s, pool); a create naming one takes its defaults, and a template with a pool keeps that many sandboxes created and frozen for creates to claim (docs/sessions.md)")
	fs.DurationVar(&f.poolRefillDelay, "sandbox-pool-refill-delay", 0, "how long the warm pools wait after a claim before they refill (0: at once)")
	fs.StringVar(&f.policyFile, "sandbox-policy", "", "the policy of every exec in a kept sandbox created without one (a job policy in JSON or YAML: allowed_commands, allowed_env, allow_shell; see docs/sessions.md); default: any program inside the sandbox's view")
}

// mountSessions mounts the sessions API at /v1/sandboxes (docs/sessions.md):
// kept sandboxes on the run service, recorded under
// <store-dir>/sessions/<id>/, on --default-backend unless a create names
// another enabled one, their workspaces copied from under
// --workspace-root, their state changes on serve's event bus. The reaper
// ends expired sandboxes every second until ctx ends. It returns the
// service: serve runs its retention with the others, and Closes it once
// it stopped serving (every live sandbox is deleted, recorded failed).
func mountSessions(ctx context.Context, d serveDeps, f sessionFlags) (*session.Service, error) {
	recs, err := store.OpenRecords(filepath.Join(d.StoreDir, store.Sessions.Dir), store.Sessions)
	if err != nil {
		return nil, err
	}
	var pol *job.Policy
	if f.policyFile != "" {
		if pol, err = loadSandboxPolicy(f.policyFile); err != nil {
			return nil, usageError{err}
		}
	}
	var templates map[string]session.Template
	if f.templatesFile != "" {
		if templates, err = loadSandboxTemplates(f.templatesFile); err != nil {
			return nil, usageError{err}
		}
	}
	s, err := session.New(session.Config{
		Runner: d.Runner, Records: recs, Backends: enabledBackends(d.Backends, d.UnsafeLocalProcess), DefaultBackend: d.Backend,
		UnsafeLocalProcess: d.UnsafeLocalProcess, Roots: d.Roots, Max: d.Runner.Config().Max, Defaults: d.Runner.Config().Defaults,
		DefaultTimeout: f.defaultTimeout, MaxTimeout: f.maxTimeout, MaxSandboxes: f.max, MaxFileBytes: f.maxFileBytes,
		Egress: d.Runner.Config().Egress, AllowHostNetwork: d.Runner.Config().AllowHostNetwork,
		Policy: pol, Events: d.Jobs.Queue(), Logger: d.Logger.WithGroup("session"), Durable: d.Runner.Config().Durable,
		Templates: templates, PoolRefillDelay: f.poolRefillDelay,
	})
	if err != nil {
		return nil, err
	}
	waitPools(ctx, s, d.Logger)
	go s.ReapEvery(ctx, time.Second)
	sessionapi.Routes(d.Mux, s, d.Auth)
	for _, p := range sessionapi.RawBodyPatterns() {
		d.AcceptRawBody(p)
	}
	return s, nil
}
