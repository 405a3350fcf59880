package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/validation"
)

// The doors (serve, worker, mcp, launch, run-agent) run on an isolating
// backend (backend.Capabilities.Isolating) or not at all: local_process
// runs a job as this process's user on the host, so it needs the
// operator's explicit flag, and an isolating backend that cannot start is
// an error, never a reason to fall back.
const (
	// unsafeLocalFlag is the operator's consent to local_process.
	unsafeLocalFlag = "unsafe-local-process"
	unsafeLocalHelp = "allow local_process: jobs naming it (or every job, with it as the backend) run WITHOUT isolation as this process's user on the host"
	// localProcess names the backend in messages and flag examples.
	localProcess = "local_process"
	// isolatingDefault is every door's default backend.
	isolatingDefault = "linux_sandbox"
	// probeTimeout bounds the start-up probe of a door's backend.
	probeTimeout = 30 * time.Second
)

// checkBackendFlag normalizes the backend kind given to flag and refuses
// a kind not in backends, and one that is not isolating
// (local_process) without --unsafe-local-process.
func checkBackendFlag(backends backend.Set, flag, kind string, unsafeLocal bool) (string, error) {
	kind = validation.NormalizeKind(kind)
	b, ok := backends[kind]
	if !ok {
		return "", usageError{fmt.Errorf("--%s %s: unknown backend (built in: %v)", flag, kind, backends.Kinds())}
	}
	if !b.Capabilities().Isolating && !unsafeLocal {
		return "", usageError{fmt.Errorf("--%s %s runs every job without isolation, as this process's user on the host; add --%s to allow it", flag, kind, unsafeLocalFlag)}
	}
	return kind, nil
}

// probeBackend asks the backend kind of backends whether it can run jobs
// now, within probeTimeout. Its error is backend.unavailable with the
// probe's reason and the flags that choose another backend.
func probeBackend(ctx context.Context, backends backend.Set, flag, kind string) error {
	b, ok := backends[kind]
	if !ok {
		return job.Errorf(job.CodeBackendUnavail, "--%s %s is not built into this binary", flag, kind).With("backend", kind)
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := b.Available(ctx)
	if err == nil {
		return nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("probe did not answer within %s: %w", probeTimeout, err)
	}
	return job.Wrap(job.CodeBackendUnavail, err,
		fmt.Sprintf("--%s %s is unavailable (%v); fix the host, or run unisolated with --%s local_process --%s", flag, kind, err, flag, unsafeLocalFlag)).
		With("backend", kind).With("reason", err.Error())
}

// doorBackend is checkBackendFlag then probeBackend: the backend a door
// starts with.
func doorBackend(ctx context.Context, backends backend.Set, flag, kind string, unsafeLocal bool) (string, error) {
	kind, err := checkBackendFlag(backends, flag, kind, unsafeLocal)
	if err != nil {
		return "", err
	}
	if err := probeBackend(ctx, backends, flag, kind); err != nil {
		return "", err
	}
	return kind, nil
}

// enabledBackends are the backends requests may name
// (runner.Config.Backends): every isolating one of backends, and the
// others (local_process) only if the operator allowed them.
//
// A placeholder kind (firecracker: registered, runs nothing in this
// build) is left out, so the runner never lists a kind it cannot run.
func enabledBackends(backends backend.Set, unsafeLocal bool) backend.Set {
	return backends.Filter(func(b backend.Backend) bool {
		c := b.Capabilities()
		return (c.Isolating || unsafeLocal) && !c.Placeholder
	})
}

// warnUnsafeLocal logs, on every start, that local_process is enabled.
func warnUnsafeLocal(log *slog.Logger, unsafeLocal bool, defaultKind string) {
	if unsafeLocal {
		log.Warn("local_process is enabled: jobs on it run without isolation as this process's user on the host",
			"flag", "--"+unsafeLocalFlag, "default_backend", defaultKind)
	}
}
