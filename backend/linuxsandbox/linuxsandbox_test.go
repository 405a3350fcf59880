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

// sandbox is a backend with the default view, or skips t.
func sandbox(t *testing.T) *linuxsandbox.Backend { return sandboxWith(t, backend.Config{}) }

// sandboxWith is a backend built with cfg, or skips t where the host
// cannot run sandboxes.
func sandboxWith(t *testing.T, cfg backend.Config) *linuxsandbox.Backend {
	t.Helper()
	b := newSandbox(t, cfg)
	if err := b.Available(context.Background()); err != nil {
		t.Skipf("linux_sandbox unavailable on this host: %v", err)
	}
	return b
}

// newSandbox is linuxsandbox.New(cfg), failing t on an error.
func newSandbox(t *testing.T, cfg backend.Config) *linuxsandbox.Backend {
	t.Helper()
	b, err := linuxsandbox.New(cfg)
	if err != nil {
		t.Fatalf("linuxsandbox.New(%+v): %v", cfg, err)
	}
	return b
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.New(linuxsandbox.Kind, suiteConfig()))
}

func TestAdversarial(t *testing.T) {
	backendtest.Adversarial(t, backendtest.New(linuxsandbox.Kind, suiteConfig()))
}

// suiteConfig is the suites' backend configuration: the default, but for
// the unprivileged child of TestUnprivileged, which has no cgroups and so
// runs as an operator who accepts unenforced limits would (the limit tests
// skip there, NeedLimit).
func suiteConfig() backend.Config {
	return backend.Config{AllowUnenforcedLimits: os.Getenv("AGENT_RUNNER_UNPRIVILEGED_CHILD") != ""}
}
