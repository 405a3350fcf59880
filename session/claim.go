package session

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/runner"
	"github.com/agent-runner/agent-runner/snapshot"
)

// claimDir is where a claim stages the caller's workspace, in the
// pooled sandbox's directory (out of the sandbox's view), before moving
// it into the workspace.
const claimDir = "workspace.claim"

// claim makes pooled sandbox it sandbox rec: what is per claim is bound
// now, never at pool time. The sandbox takes rec's id
// (runner.Sandbox.Rebind); a copy of workspace.path (package snapshot)
// or a clone of workspace.repository is staged beside its workspace,
// out of its view, and moved in, owned by the sandbox's
// workload user (backend.MoveIntoWorkspace); an allowlist's bridge gets
// rec's rules and its egress log (in rec's directory); then the sandbox
// is thawed. Its workspace stays in the pool's directory, removed when
// the sandbox ends. On an error the pooled sandbox is discarded and
// nothing of it is left; cold reports whether a cold start may still
// serve the create (the error was the pooled sandbox's, not the
// request's).
func (s *Service) claim(ctx context.Context, it *pooled, rec Record, rules []egress.Rule) (h *handle, cold bool, err error) {
	fail := func(err error, cold bool) (*handle, bool, error) {
		s.discard(it)
		return nil, cold, err
	}
	it.sb.Rebind(rec.ID)
	if rec.Workspace.Path != "" || rec.Workspace.Repository != "" {
		staged := filepath.Join(it.dir, claimDir)
		var err error
		if src := rec.Workspace.Path; src != "" {
			_, err = snapshot.Copy(ctx, src, staged, snapshot.Options{})
		} else {
			err = s.cloneWorkspace(ctx, rec.ID, rec.Workspace, staged)
		}
		if err == nil {
			err = backend.MoveIntoWorkspace(staged, it.sb.Workspace())
		}
		os.RemoveAll(staged)
		if err != nil {
			return fail(err, false)
		}
	}
	if it.bridge != nil {
		it.bridge.bind(rec.ID, filepath.Join(s.cfg.Records.Path(rec.ID), EgressFile), rules)
	}
	if err := it.sb.Resume(ctx); err != nil {
		return fail(err, true)
	}
	bridge := it.bridge
	return &handle{sb: it.sb, dir: it.dir, stop: func() { bridge.close(s) }}, false, nil
}

// build makes sandbox rec: claimed from pooled sandbox it when there is
// one, else (or when the pooled one cannot be claimed) started cold,
// which rec's start then says.
func (s *Service) build(ctx context.Context, rec *Record, it *pooled, spec runner.SandboxSpec, rules []egress.Rule) (*handle, error) {
	if it != nil {
		h, cold, err := s.claim(ctx, it, *rec, rules)
		if err == nil || !cold {
			return h, err
		}
		s.cfg.Logger.Warn("cannot claim a pooled sandbox; starting one cold", "id", rec.ID, "template", rec.Template, "error", err)
		rec.Start, rec.StartReason = StartCold, ColdClaimFailed
	}
	return s.start(ctx, *rec, spec, rules)
}

// poolBridge is a pooled sandbox's egress bridge: opened with no rules
// (every connection refused) and no log; claim binds both.
type poolBridge struct {
	run *egress.Run
	br  *egress.Bridge
	// claimed is the claim's sandbox id and egress log, once bound.
	claimed atomic.Pointer[claimedEgress]
}

type claimedEgress struct {
	id  string
	log *egress.AuditLog
}

// openPoolBridge opens a bridge of the operator's gateway for pooled
// sandbox id.
func (s *Service) openPoolBridge(id string) (*poolBridge, *backend.Egress, error) {
	if s.cfg.Egress == nil || s.cfg.Egress.Gateway == nil {
		return nil, nil, job.Errorf(job.CodeNetworkDenied, "network allowlist needs the operator's egress gateway")
	}
	pb := &poolBridge{}
	pb.run = &egress.Run{ID: id, Audit: func(d egress.Decision) {
		c := pb.claimed.Load()
		if c == nil {
			return
		}
		d.Run = c.id
		if err := c.log.Write(d); err != nil {
			s.cfg.Logger.Warn("cannot record an egress decision", "id", c.id, "error", err)
		}
	}}
	br, err := s.cfg.Egress.Gateway.Open(context.Background(), pb.run)
	if err != nil {
		return nil, nil, err
	}
	pb.br = br
	return pb, &backend.Egress{Socket: br.Socket, CABundle: br.CABundle}, nil
}

// bind gives the bridge its claim: decisions logged to path as sandbox
// id's, connections held to rules.
func (pb *poolBridge) bind(id, path string, rules []egress.Rule) {
	pb.claimed.Store(&claimedEgress{id: id, log: egress.NewAuditLogMax(path, 0)})
	pb.run.SetRules(rules)
}

// close removes the bridge and closes its log; a nil bridge does
// nothing.
func (pb *poolBridge) close(s *Service) {
	if pb == nil {
		return
	}
	if err := pb.br.Close(); err != nil {
		s.cfg.Logger.Warn("cannot remove a sandbox's egress bridge", "error", err)
	}
	if c := pb.claimed.Load(); c != nil {
		if err := c.log.Close(); err != nil {
			s.cfg.Logger.Warn("cannot close a sandbox's egress log", "id", c.id, "error", err)
		}
	}
}
