package linuxsandbox_test

import (
	"context"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
)

// A failed probe (here: a canceled context, as a client disconnect during
// the first request gives) is not remembered: the next call probes again.
func TestProbeRemembersOnlySuccess(t *testing.T) {
	sandbox(t) // skips where the host cannot run sandboxes at all
	b := newSandbox(t, backend.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Available(ctx); err == nil {
		t.Fatal("Available(canceled ctx) = nil, want the probe's failure")
	}
	if err := b.Available(context.Background()); err != nil {
		t.Errorf("Available after a failed probe = %v, want a fresh probe that succeeds", err)
	}
}
