package main

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/runner"
)

// egressFlags are the operator's network settings on run, serve and
// worker (docs/egress.md): the ceiling of hosts "allowlist" requests may
// name, name pins, extra upstream roots, and whether "host" is allowed.
type egressFlags struct {
	allow, resolve []string
	upstreamCA     string
	allowHost      bool
}

func (f *egressFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.allow, "egress-allow", nil, `host a job or task may reach through the egress gateway ("api.example.com", "*.example.com", optional ":port"; default ports 443 and 80); repeatable; requests can only narrow this ceiling`)
	fs.StringArrayVar(&f.resolve, "egress-resolve", nil, "HOST:PORT:ADDR pins HOST (PORT, or * for any) to ADDR for the gateway, as curl --resolve; a pinned address may be private or loopback; repeatable")
	fs.StringVar(&f.upstreamCA, "egress-upstream-ca", "", "PEM file of extra roots the gateway trusts for upstreams it intercepts (besides the system roots)")
	fs.BoolVar(&f.allowHost, "allow-host-network", false, `let requests use network "host": the workload shares this host's network, unfiltered`)
}

// runnerConfig fills the runner's egress settings. Without --egress-allow
// there is no gateway and "allowlist" requests are refused.
func (f *egressFlags) runnerConfig(cfg *runner.Config, log *slog.Logger, reg prometheus.Registerer) error {
	op, err := f.operator(log, reg)
	if err != nil {
		return err
	}
	cfg.AllowHostNetwork, cfg.Egress = f.allowHost, op
	return nil
}

// operator builds the gateway and ceiling, or nil without --egress-allow.
func (f *egressFlags) operator(log *slog.Logger, reg prometheus.Registerer) (*egress.Operator, error) {
	if len(f.allow) == 0 {
		if len(f.resolve) > 0 || f.upstreamCA != "" {
			return nil, usageError{fmt.Errorf("--egress-resolve and --egress-upstream-ca need --egress-allow")}
		}
		return nil, nil
	}
	ceiling, err := egress.ParseRules(f.allow)
	if err != nil {
		return nil, usageError{fmt.Errorf("--egress-allow: %w", err)}
	}
	pins, err := egress.ParseResolve(f.resolve)
	if err != nil {
		return nil, usageError{fmt.Errorf("--egress-resolve: %w", err)}
	}
	gc := egress.Config{Resolve: pins, Metrics: reg, Logger: log}
	if f.upstreamCA != "" {
		pem, err := os.ReadFile(f.upstreamCA)
		if err != nil {
			return nil, usageError{fmt.Errorf("--egress-upstream-ca: %w", err)}
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageError{fmt.Errorf("--egress-upstream-ca %s: no PEM certificate", f.upstreamCA)}
		}
		gc.UpstreamRoots = pool
	}
	g, err := egress.New(gc)
	if err != nil {
		return nil, err
	}
	return &egress.Operator{Gateway: g, Ceiling: ceiling}, nil
}
