package runner

import (
	"context"
	"path/filepath"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
)

// EgressFile is the run record's audit of egress decisions: one JSON
// egress.Decision per allowed connection, the first refusals one by one
// and summaries of the rest, up to egressRecordBytes (docs/egress.md).
const EgressFile = "egress.jsonl"

// egressShare is the part of max_run_record_bytes EgressFile may take.
const egressShare = 8

// egressRecordBytes is the cap of the job's EgressFile: an eighth of its
// max_run_record_bytes, at most egress.DefaultMaxAuditBytes.
func egressRecordBytes(l job.Limits) int64 {
	if l.MaxRunRecordBytes <= 0 {
		return egress.DefaultMaxAuditBytes
	}
	return max(min(l.MaxRunRecordBytes/egressShare, egress.DefaultMaxAuditBytes), 1)
}

// networkRules checks the request's network mode against the operator's
// settings and returns the allowlist of an "allowlist" job.
func (r *Runner) networkRules(p job.Policy) ([]egress.Rule, *job.Error) {
	switch p.Network {
	case job.NetworkHost:
		if !r.cfg.AllowHostNetwork {
			return nil, job.Errorf(job.CodeNetworkDenied, "network host is not enabled on this runner (the operator's --allow-host-network)").
				With("network", p.Network)
		}
	case job.NetworkAllowlist:
		rules, err := egress.ParseRules(p.AllowedHosts)
		if err != nil {
			return nil, job.Errorf(job.CodeInvalidRequest, "policy.allowed_hosts: %v", err).With("field", "policy.allowed_hosts")
		}
		if err := r.cfg.Egress.Narrow(rules, "policy.allowed_hosts"); err != nil {
			return nil, job.AsError(err).With("network", p.Network)
		}
		return rules, nil
	}
	return nil, nil
}

// networkRules is the execution's allowlist: a step's network was
// decided by its task door (Step.Egress), a job's is checked here.
func (e *execution) networkRules() ([]egress.Rule, *job.Error) {
	if e.opts.Step != nil {
		return nil, nil
	}
	return e.r.networkRules(e.req.Policy)
}

// egressBridge is the bridge of an "allowlist" execution and the function
// that closes it: a step's, which its caller opened (and closes), else
// one opened for the job (openEgress).
func (e *execution) egressBridge(ctx context.Context, rules []egress.Rule) (*backend.Egress, func(), error) {
	if st := e.opts.Step; st != nil {
		if st.Egress == nil {
			return nil, nil, job.Errorf(job.CodeBackendSetupFailed, "network allowlist needs the task's egress bridge")
		}
		return st.Egress, func() {}, nil
	}
	return e.openEgress(ctx, rules)
}

// openEgress starts the job's gateway bridge. Every decision the gateway
// records (refusals past its caps are summarized) is appended to the run
// record's egress.jsonl, within egressRecordBytes, and handed to
// Options.Egress.
func (e *execution) openEgress(ctx context.Context, rules []egress.Rule) (*backend.Egress, func(), error) {
	log := egress.NewAuditLogMax(filepath.Join(e.r.store.RunDir(e.req.JobID), EgressFile), egressRecordBytes(e.req.Limits))
	audit := func(d egress.Decision) {
		if err := log.Write(d); err != nil {
			e.log().Warn("cannot record an egress decision", "error", err)
		}
		if e.opts.Egress != nil {
			e.opts.Egress(e.req.JobID, d)
		}
	}
	br, err := e.r.cfg.Egress.Gateway.Open(ctx, &egress.Run{ID: e.req.JobID, Rules: rules, Audit: audit})
	if err != nil {
		return nil, nil, err
	}
	// The bridge is closed first: its connections' last decisions are
	// written before the log is. The job's result does not depend on
	// either; a bridge left on disk or an audit log not fully written is
	// the operator's to know.
	stop := func() {
		if err := br.Close(); err != nil {
			e.log().Warn("cannot remove the job's egress bridge", "error", err)
		}
		if err := log.Close(); err != nil {
			e.log().Error("cannot close the job's egress audit log", "file", EgressFile, "error", err)
		}
	}
	return &backend.Egress{Socket: br.Socket, CABundle: br.CABundle}, stop, nil
}
