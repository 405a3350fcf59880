package linuxsandbox_test

import (
	"context"
	"os"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
)

func TestMain(m *testing.M) {
	linuxsandbox.MaybeInit()
	os.Exit(m.Run())
}

func sandbox(t *testing.T) *linuxsandbox.Backend {
	t.Helper()
	b := linuxsandbox.New()
	if err := b.Available(context.Background()); err != nil {
		t.Skipf("linux_sandbox unavailable on this host: %v", err)
	}
	return b
}

func TestConformance(t *testing.T) { backendtest.Run(t, sandbox(t)) }

func TestAdversarial(t *testing.T) {
	backendtest.Adversarial(t, func(t *testing.T) backend.Backend { return sandbox(t) })
}
