package session

import (
	"slices"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
)

// A create's secrets name secrets of the operator's secrets file
// (Config.Secrets, serve's --secrets-file), as an agent task's do, and
// are handled as a task's host-bound secrets are: the sandbox never
// holds a value. Each process gets NAME=<placeholder> in its default
// environment (env.go); the sandbox's egress bridge holds the bindings,
// and the gateway puts the real value in place of the placeholder in
// request headers to the hosts the secrets file binds the secret to
// (intercepted TLS, the bridge's own CA; egress.Binding). So a secret
// needs network allowlist and a binding to hosts in the file: one the
// file registers without hosts (which a task would get in plain) is
// refused, as is one the file does not register. Values are read when
// the sandbox is created (a secret that cannot be read then refuses the
// create) and are never recorded: the record keeps the names.

// checkSecrets refuses names the sandbox cannot be given: any without
// network allowlist or a secrets file; one not registered, or not bound
// to hosts (auth.forbidden); one named twice or also set in env; one
// whose value cannot be read now.
func (s *Service) checkSecrets(names []string, env map[string]string, network Network) error {
	if len(names) == 0 {
		return nil
	}
	bad := func(code job.Code, name, format string, args ...any) error {
		return job.Errorf(code, format, args...).With("field", "secrets").With("secret", name)
	}
	if s.cfg.Secrets == nil {
		return bad(job.CodeForbidden, names[0], "this server has no secrets file (serve --secrets-file), so no sandbox may ask for a secret")
	}
	if network.Mode != job.NetworkAllowlist {
		return bad(job.CodeInvalidRequest, names[0], "secrets need network allowlist: the egress gateway puts their values in requests to their hosts")
	}
	for i, name := range names {
		e, ok := s.cfg.Secrets.Lookup(name)
		switch {
		case slices.Contains(names[:i], name):
			return bad(job.CodeInvalidRequest, name, "secret %s is named twice", name)
		case env[name] != "":
			return bad(job.CodeInvalidRequest, name, "secret %s is also set in env", name)
		case !ok:
			return bad(job.CodeForbidden, name, "secret %s is not registered in the secrets file %s", name, s.cfg.Secrets.Path)
		case len(e.Hosts) == 0:
			return bad(job.CodeForbidden, name, "secret %s is bound to no hosts in the secrets file %s: a sandbox gets a secret only as a placeholder the egress gateway fills for its hosts", name, s.cfg.Secrets.Path)
		}
		if _, err := s.cfg.Secrets.Value(name, s.cfg.Getenv); err != nil {
			return job.AsError(err).With("field", "secrets").With("secret", name)
		}
	}
	return nil
}

// bindSecrets reads each secret's value and returns the gateway's
// bindings (placeholder to value, for its hosts) and the placeholders
// the sandbox's processes see, by name.
func (s *Service) bindSecrets(names []string) ([]egress.Binding, map[string]string, error) {
	if len(names) == 0 {
		return nil, nil, nil
	}
	var bs []egress.Binding
	env := map[string]string{}
	for _, name := range names {
		e, _ := s.cfg.Secrets.Lookup(name)
		v, err := s.cfg.Secrets.Value(name, s.cfg.Getenv)
		if err != nil {
			return nil, nil, job.AsError(err).With("field", "secrets").With("secret", name)
		}
		ph := egress.Placeholder(name)
		bs = append(bs, egress.Binding{Name: name, Placeholder: ph, Value: v, Hosts: e.Hosts})
		env[name] = ph
	}
	return bs, env, nil
}
