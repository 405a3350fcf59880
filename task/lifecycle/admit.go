package lifecycle

import (
	"errors"
	"strings"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/secretfile"
	"github.com/agent-runner/agent-runner/task/agentstep"
	"github.com/agent-runner/agent-runner/task/manifest"
)

// Admit is the operator's rule for a task, checked when it is submitted
// (the task store calls it for tasks and children) and again before it
// runs (a task recovered after a restart meets the new configuration): a
// local repository (a path or file:// URL) lies under cfg.Roots, and every
// secret is registered in cfg.Secrets under its name, with the same source
// and key when the manifest gives them, and is not too short to scrub
// (secretfile.MinValueBytes; a value that cannot be read yet is left to
// provisioning, which reads it again); and on a backend with a view the
// agent command is a program its sandbox can run (agentstep.Check).
func Admit(cfg Config, t *manifest.Task) error {
	if err := admitRepository(cfg, t.Repository); err != nil {
		return err
	}
	if err := admitNetwork(cfg, t); err != nil {
		return err
	}
	if cfg.Backend != nil {
		if err := agentstep.Check(cfg.Backend, t); err != nil {
			return err
		}
	}
	for _, s := range t.Secrets {
		if err := admitSecret(cfg, s); err != nil {
			return err
		}
		if err := admitBoundSecret(cfg, t, s); err != nil {
			return err
		}
	}
	return nil
}

// admitBoundSecret refuses a secret the secrets file binds to hosts (its
// value is added at the egress gateway, never given to the agent) when the
// task has no network to reach them: it could never be used, and the
// agent's calls would fail only after retrying.
func admitBoundSecret(cfg Config, t *manifest.Task, s manifest.Secret) error {
	if cfg.Secrets == nil {
		return nil
	}
	e, ok := cfg.Secrets.Lookup(s.Name)
	if !ok || len(e.Hosts) == 0 || t.Network() != job.NetworkDisabled {
		return nil
	}
	return job.Errorf(job.CodeInvalidRequest, "secret %s is bound to hosts (%s) that a task with vm.network_mode %s cannot reach; set vm.network_mode: outbound with those hosts in vm.allowed_hosts", s.Name, ruleList(e.Hosts), t.VM.NetworkMode).
		With("field", "vm.network_mode").With("secret", s.Name)
}

// ruleList names rules as the secrets file writes them.
func ruleList(rules []egress.Rule) string {
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.String()
	}
	return strings.Join(names, ", ")
}

func admitRepository(cfg Config, r manifest.Repository) error {
	path, local, err := r.LocalPath()
	if err != nil || !local || cfg.Roots == nil {
		return err
	}
	if _, err := cfg.Roots.Check(path); err != nil {
		return job.AsError(err).With("field", "repository.url")
	}
	return nil
}

func admitSecret(cfg Config, s manifest.Secret) error {
	deny := func(format string, args ...any) error {
		return job.Errorf(job.CodeForbidden, format, args...).With("field", "secrets").With("secret", s.Name)
	}
	if cfg.Secrets == nil {
		return deny("secret %s: this runner has no secrets file (serve --secrets-file), so no task may ask for a secret", s.Name)
	}
	e, ok := cfg.Secrets.Lookup(s.Name)
	if !ok {
		return deny("secret %s is not registered in the secrets file %s", s.Name, cfg.Secrets.Path)
	}
	if (s.Source != "" || s.Key != "") && (s.Source != e.Source || s.Key != e.Key) {
		return deny("secret %s: %s %q is not what the secrets file %s registers under that name", s.Name, s.Source, s.Key, cfg.Secrets.Path)
	}
	if _, err := cfg.Secrets.Value(s.Name, cfg.Env); errors.Is(err, secretfile.ErrTooShort) {
		return job.AsError(err).With("field", "secrets").With("secret", s.Name)
	}
	return nil
}
