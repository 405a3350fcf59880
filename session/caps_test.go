package session_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// refused creates req as ctx's owner and wants session.limit_reached
// with details, and no record of the id left behind.
func refused(t *testing.T, f *fixture, ctx context.Context, req session.CreateRequest, details map[string]any) {
	t.Helper()
	req.ID = "refused"
	_, _, err := f.s.Create(ctx, req)
	var jerr *job.Error
	if !errors.As(err, &jerr) || jerr.Code != job.CodeSessionLimit {
		t.Fatalf("Create(%+v) = %v, want session.limit_reached", req, err)
	}
	got := map[string]any{}
	for k := range details {
		got[k] = jerr.Details[k]
	}
	if diff := cmp.Diff(details, got); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
	if _, err := f.s.Get("refused"); job.CodeOf(err) != job.CodeJobNotFound {
		t.Errorf("a refused create left a record: %v", err)
	}
}

// TestCapPerOwner: one owner (the token that created them) keeps at
// most MaxPerOwner live sandboxes; another owner is not held by them,
// and a deleted sandbox frees its place.
func TestCapPerOwner(t *testing.T) {
	f := newFixture(t, "local_process", func(cfg *session.Config) { cfg.MaxPerOwner = 2 })
	alice := session.WithOwner(context.Background(), "alice")
	bob := session.WithOwner(context.Background(), "bob")
	var first string
	for i := range 2 {
		rec, _, err := f.s.Create(alice, session.CreateRequest{})
		if err != nil {
			t.Fatalf("alice's create %d: %v", i, err)
		}
		if first == "" {
			first = rec.ID
		}
	}
	refused(t, f, alice, session.CreateRequest{}, map[string]any{"cap": session.CapSandboxesPerToken, "limit": int64(2), "in_use": int64(2)})
	if _, _, err := f.s.Create(bob, session.CreateRequest{}); err != nil {
		t.Fatalf("bob's create: %v", err)
	}
	if _, err := f.s.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.s.Create(alice, session.CreateRequest{}); err != nil {
		t.Errorf("alice's create after a delete: %v", err)
	}
}

// TestCapTotal: the total cap's details name it.
func TestCapTotal(t *testing.T) {
	f := newFixture(t, "local_process", func(cfg *session.Config) { cfg.MaxSandboxes = 1 })
	f.create(t, session.CreateRequest{})
	refused(t, f, context.Background(), session.CreateRequest{}, map[string]any{"cap": session.CapSandboxes, "limit": int64(1), "in_use": int64(1)})
}

// TestCapOvercommit: the live sandboxes' memory_mb stay within the
// host's memory times the memory ratio, their cpu_count within its CPUs
// times the CPU ratio.
func TestCapOvercommit(t *testing.T) {
	f := newFixture(t, "local_process", func(cfg *session.Config) {
		cfg.HostMemoryMB, cfg.MemoryOvercommit = 1000, 1.5
		cfg.HostCPUs, cfg.CPUOvercommit = 2, 1
	})
	f.create(t, session.CreateRequest{Limits: session.Limits{MemoryMB: 1000, CPUCount: 1}})
	refused(t, f, context.Background(), session.CreateRequest{Limits: session.Limits{MemoryMB: 501, CPUCount: 1}},
		map[string]any{"cap": session.CapMemory, "limit": int64(1500), "in_use": int64(1000), "requested": int64(501)})
	f.create(t, session.CreateRequest{Limits: session.Limits{MemoryMB: 500, CPUCount: 1}})
	refused(t, f, context.Background(), session.CreateRequest{Limits: session.Limits{MemoryMB: 1, CPUCount: 1}},
		map[string]any{"cap": session.CapMemory, "limit": int64(1500), "in_use": int64(1500)})

	g := newFixture(t, "local_process", func(cfg *session.Config) { cfg.HostCPUs, cfg.CPUOvercommit = 2, 1.5 })
	g.create(t, session.CreateRequest{Limits: session.Limits{CPUCount: 2}})
	refused(t, g, context.Background(), session.CreateRequest{Limits: session.Limits{CPUCount: 2}},
		map[string]any{"cap": session.CapCPU, "limit": int64(3), "in_use": int64(2), "requested": int64(2)})
	g.create(t, session.CreateRequest{Limits: session.Limits{CPUCount: 1}})
}
