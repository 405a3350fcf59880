package session_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// TestPoolClose: Close deletes the pooled sandboxes and their directory.
func TestPoolClose(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pool")
	f, _ := poolFixture(t, "local_process", 2, func(c *session.Config) { c.PoolDir = dir })
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 2 {
		t.Fatalf("pool directory holds %d, %v; want 2", len(ents), err)
	}
	f.s.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("pool directory after Close: %v, want gone", err)
	}
}

// TestPoolCountsAgainstTotal: pooled sandboxes count against
// MaxSandboxes; a pool never fills past it.
func TestPoolCountsAgainstTotal(t *testing.T) {
	f, _ := poolFixture(t, "local_process", 2, func(c *session.Config) { c.MaxSandboxes = 3; c.PoolRefillDelay = time.Hour })
	f.create(t, session.CreateRequest{})
	_, _, err := f.s.Create(context.Background(), session.CreateRequest{})
	wantCode(t, "a create beyond the total with a full pool", err, job.CodeSessionLimit)
	if rec := f.create(t, session.CreateRequest{Template: "t"}); rec.Start != session.StartWarm {
		t.Errorf("claim at the total: %q %q, want warm", rec.Start, rec.StartReason)
	}
}

// TestTemplatesChecked: a template is admitted when the service starts:
// one beyond the operator's maxima, a pool too large, a name that is not
// an id, or a network beyond what the operator allows stops it.
func TestTemplatesChecked(t *testing.T) {
	f := newFixture(t, "local_process", nil)
	for name, tt := range map[string]session.Template{
		"big":      {Limits: session.Limits{MemoryMB: 1 << 40}},
		"pool":     {Pool: session.MaxPool + 1},
		"network":  {Network: &session.Network{Mode: job.NetworkHost}},
		"bad/name": {},
	} {
		cfg := f.cfg
		cfg.Templates = map[string]session.Template{name: tt}
		if s, err := session.New(cfg); err == nil {
			s.Close()
			t.Errorf("New with template %q %+v = nil error, want refused", name, tt)
		}
	}
}

// TestPoolDeadReplaced: a pooled sandbox that died is never handed out:
// a create that meets it at its claim starts cold (claim_failed) and
// runs, the liveness check discards one, and the pool is refilled with
// live ones.
func TestPoolDeadReplaced(t *testing.T) {
	for _, kind := range backends() {
		t.Run(kind, func(t *testing.T) {
			f, _ := poolFixture(t, kind, 1, nil)
			session.KillPooled(f.s, "t")
			rec := f.create(t, session.CreateRequest{Template: "t"})
			if rec.Start != session.StartCold || rec.StartReason != session.ColdClaimFailed {
				t.Errorf("claim of a dead pooled sandbox: %q %q, want cold %q", rec.Start, rec.StartReason, session.ColdClaimFailed)
			}
			if res := f.exec(t, rec.ID, "true"); res.Status != job.StatusCompleted {
				t.Errorf("exec in the cold fallback: %s %+v", res.Status, res.Error)
			}
			waitPools(t, f)
			session.KillPooled(f.s, "t")
			session.CheckPooled(f.s)
			waitPools(t, f)
			rec = f.create(t, session.CreateRequest{Template: "t"})
			if rec.Start != session.StartWarm {
				t.Fatalf("create after the check replaced the dead one: %q %q, want warm", rec.Start, rec.StartReason)
			}
			if res := f.exec(t, rec.ID, "true"); res.Status != job.StatusCompleted {
				t.Errorf("exec in the replacement: %s %+v", res.Status, res.Error)
			}
		})
	}
}

// TestPoolClaimHeldToCallerCaps: a warm claim is held to the caller's
// caps as any create (a pooled sandbox is no caller's until claimed),
// and one the caps refuse leaves the pooled sandbox in its pool.
func TestPoolClaimHeldToCallerCaps(t *testing.T) {
	f, _ := poolFixture(t, "local_process", 2, func(c *session.Config) { c.MaxPerOwner = 1; c.PoolRefillDelay = time.Hour })
	a := session.WithOwner(context.Background(), "a")
	if rec, _, err := f.s.Create(a, session.CreateRequest{Template: "t"}); err != nil || rec.Start != session.StartWarm {
		t.Fatalf("a's first claim = %q, %v; want warm", rec.Start, err)
	}
	_, _, err := f.s.Create(a, session.CreateRequest{Template: "t"})
	wantCode(t, "a's second claim over its cap", err, job.CodeSessionLimit)
	b := session.WithOwner(context.Background(), "b")
	if rec, _, err := f.s.Create(b, session.CreateRequest{Template: "t"}); err != nil || rec.Start != session.StartWarm {
		t.Errorf("b's claim after a's refusal = %q %q, %v; want warm (the pooled sandbox stayed)", rec.Start, rec.StartReason, err)
	}
}
