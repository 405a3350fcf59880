package session

import (
	"context"
	"path/filepath"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
)

// EgressFile is where an allowlist sandbox's egress decisions are kept,
// in its record's directory: one JSON line per connection the gateway
// decided (egress.AuditLog).
const EgressFile = "egress.jsonl"

// network checks a create's network against the operator's: "disabled"
// (the default); "allowlist" within the egress ceiling (Config.Egress,
// serve's --egress-allow); "host" only with Config.AllowHostNetwork. It
// returns the record's network and an allowlist's rules.
func (s *Service) network(n *Network) (Network, []egress.Rule, error) {
	if n == nil || n.Mode == "" || n.Mode == job.NetworkDisabled {
		if n != nil && len(n.AllowedHosts) > 0 {
			return Network{}, nil, job.Errorf(job.CodeInvalidRequest, "network.allowed_hosts needs network.mode allowlist").With("field", "network.allowed_hosts")
		}
		return Network{Mode: job.NetworkDisabled}, nil, nil
	}
	switch n.Mode {
	case job.NetworkHost:
		if !s.cfg.AllowHostNetwork {
			return Network{}, nil, job.Errorf(job.CodeNetworkDenied, "network host is not enabled on this server (the operator's --allow-host-network)").With("field", "network.mode")
		}
		if len(n.AllowedHosts) > 0 {
			return Network{}, nil, job.Errorf(job.CodeInvalidRequest, "network.allowed_hosts needs network.mode allowlist").With("field", "network.allowed_hosts")
		}
		return Network{Mode: job.NetworkHost}, nil, nil
	case job.NetworkAllowlist:
		rules, err := egress.ParseRules(n.AllowedHosts)
		if err != nil {
			return Network{}, nil, job.Errorf(job.CodeInvalidRequest, "network.allowed_hosts: %v", err).With("field", "network.allowed_hosts")
		}
		if len(rules) == 0 {
			return Network{}, nil, job.Errorf(job.CodeInvalidRequest, "network allowlist needs network.allowed_hosts").With("field", "network.allowed_hosts")
		}
		if err := s.cfg.Egress.Narrow(rules, "network.allowed_hosts"); err != nil {
			return Network{}, nil, err
		}
		return Network{Mode: job.NetworkAllowlist, AllowedHosts: n.AllowedHosts}, rules, nil
	}
	return Network{}, nil, job.Errorf(job.CodeInvalidRequest, "network.mode %q is not disabled, allowlist or host", n.Mode).With("field", "network.mode")
}

// openEgress opens sandbox rec's bridge to the operator's gateway with
// rules and its secrets' bindings (secrets.go), its decisions written to
// the record's EgressFile, and returns it with the secrets' placeholders
// by name. The bridge lives until the returned stop, which end calls
// once the sandbox is deleted (not the create's ctx: the sandbox
// outlives its create).
func (s *Service) openEgress(rec Record, rules []egress.Rule) (*backend.Egress, map[string]string, func(), error) {
	id := rec.ID
	bindings, secretEnv, err := s.bindSecrets(rec.Secrets)
	if err != nil {
		return nil, nil, nil, err
	}
	log := egress.NewAuditLogMax(filepath.Join(s.cfg.Records.Path(id), EgressFile), 0)
	audit := func(d egress.Decision) {
		if err := log.Write(d); err != nil {
			s.cfg.Logger.Warn("cannot record an egress decision", "id", id, "error", err)
		}
	}
	br, err := s.cfg.Egress.Gateway.Open(context.Background(), &egress.Run{ID: id, Rules: rules, Bindings: bindings, Audit: audit})
	if err != nil {
		log.Close()
		return nil, nil, nil, err
	}
	stop := func() {
		if err := br.Close(); err != nil {
			s.cfg.Logger.Warn("cannot remove a sandbox's egress bridge", "id", id, "error", err)
		}
		if err := log.Close(); err != nil {
			s.cfg.Logger.Warn("cannot close a sandbox's egress log", "id", id, "error", err)
		}
	}
	return &backend.Egress{Socket: br.Socket, CABundle: br.CABundle}, secretEnv, stop, nil
}
