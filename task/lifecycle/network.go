package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/task/manifest"
	"github.com/agent-runner/agent-runner/task/stage"
	"github.com/agent-runner/agent-runner/task/state"
)

// EgressFile is a task's audit of egress decisions, one JSON
// egress.Decision per connection, beside its logs in outbox/progress.
const EgressFile = "egress.jsonl"

// admitNetwork holds a task to the operator's network settings at
// submit: vm.network_mode full needs AllowHostNetwork, outbound's
// vm.allowed_hosts must lie within the egress ceiling, and a remote
// repository is cloned through the gateway, so its host must lie within
// the ceiling too (and it must be an http or https URL).
func admitNetwork(cfg Config, t *manifest.Task) error {
	switch t.Network() {
	case job.NetworkHost:
		if !cfg.AllowHostNetwork {
			return job.Errorf(job.CodeNetworkDenied, "vm.network_mode %s gives the task the host's network, which the operator has not enabled (--task-allow-host-network)", t.VM.NetworkMode).
				With("field", "vm.network_mode")
		}
	case job.NetworkAllowlist:
		rules, err := t.AllowedHosts()
		if err != nil {
			return job.Errorf(job.CodeInvalidRequest, "vm.allowed_hosts: %v", err).With("field", "vm.allowed_hosts")
		}
		if err := cfg.Egress.Narrow(rules, "vm.allowed_hosts"); err != nil {
			return err
		}
	}
	rule, remote, err := t.Repository.CloneRule()
	if err != nil || !remote {
		return err
	}
	return cfg.Egress.Narrow([]egress.Rule{rule}, "repository.url")
}

// egressRun is a task's use of the gateway: the audit file and events
// every decision goes to, and the task's logger for what they cannot
// hold.
type egressRun struct {
	audits *egress.AuditLog
	m      *state.Machine
	log    *slog.Logger
}

func newEgressRun(l stage.Layout, m *state.Machine, log *slog.Logger) *egressRun {
	return &egressRun{audits: egress.NewAuditLog(filepath.Join(l.Progress(), EgressFile)), m: m, log: log}
}

// audit records d in egress.jsonl and as an "egress" event.
func (e *egressRun) audit(d egress.Decision) {
	if err := e.audits.Write(d); err != nil {
		e.log.Warn("cannot record an egress decision", "file", EgressFile, "error", err)
	}
	verdict := "allowed"
	if !d.Allowed {
		verdict = "refused"
	}
	note(e.m, e.log, "egress", fmt.Sprintf("%s %s:%d (%s, %s)", verdict, d.Host, d.Port, d.Mode, d.Rule))
}

// close closes the audit file once no bridge or clone proxy is left.
func (e *egressRun) close() {
	if err := e.audits.Close(); err != nil {
		e.log.Error("cannot close the task's egress audit log", "file", EgressFile, "error", err)
	}
}

// cloneProxy serves the clone of a remote repository: the gateway on a
// loopback TCP port (git speaks to proxies over TCP) allowing only the
// repository's host, for as long as staging runs. It returns the proxy
// URL and a stop function; remote is false for a local repository.
func cloneProxy(ctx context.Context, cfg Config, t *manifest.Task, e *egressRun) (string, func(), error) {
	rule, remote, err := t.Repository.CloneRule()
	if err != nil || !remote {
		return "", func() {}, err
	}
	if err := cfg.Egress.Narrow([]egress.Rule{rule}, "repository.url"); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, job.Wrap(job.CodeBackendSetupFailed, err, "cannot open the clone's egress proxy")
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A proxy that stops early fails the clone, whose error is the
		// task's; why the proxy stopped is the operator's.
		if err := cfg.Egress.Gateway.Serve(ctx, ln, &egress.Run{ID: t.Metadata.ID + "/clone", Rules: []egress.Rule{rule}, Audit: e.audit}, nil); err != nil {
			e.log.Warn("the clone's egress proxy stopped", "error", err)
		}
	}()
	return "http://" + ln.Addr().String(), func() { cancel(); <-done }, nil
}

// agentNetwork opens what the agent's network mode needs: for outbound,
// a gateway bridge with the task's allowlist and the secrets bound to
// hosts. It returns the mode, the bridge for the backend (or nil) and a
// stop function.
func agentNetwork(ctx context.Context, cfg Config, t *manifest.Task, bindings []egress.Binding, e *egressRun) (string, *backend.Egress, func(), error) {
	mode := t.Network()
	if mode != job.NetworkAllowlist {
		return mode, nil, func() {}, nil
	}
	rules, err := t.AllowedHosts()
	if err != nil {
		return "", nil, nil, err
	}
	if err := cfg.Egress.Narrow(rules, "vm.allowed_hosts"); err != nil {
		return "", nil, nil, err
	}
	br, err := cfg.Egress.Gateway.Open(ctx, &egress.Run{ID: t.Metadata.ID, Rules: rules, Bindings: bindings, Audit: e.audit})
	if err != nil {
		return "", nil, nil, err
	}
	stop := func() {
		if err := br.Close(); err != nil {
			e.log.Warn("cannot remove the task's egress bridge", "error", err)
		}
	}
	return mode, &backend.Egress{Socket: br.Socket, CABundle: br.CABundle}, stop, nil
}

// bindSecrets replaces the value of every secret the secrets file binds
// to hosts with a placeholder, returning the bindings the gateway needs
// to put the real value back in requests to those hosts. The workload
// never holds the value itself.
func bindSecrets(cfg Config, secrets map[string]string) []egress.Binding {
	var out []egress.Binding
	for name, value := range secrets {
		e, ok := cfg.Secrets.Lookup(name)
		if !ok || len(e.Hosts) == 0 {
			continue
		}
		ph := egress.Placeholder(name)
		out = append(out, egress.Binding{Name: name, Placeholder: ph, Value: value, Hosts: e.Hosts})
		secrets[name] = ph
	}
	return out
}
