package linuxsandbox_test

import (
	"context"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
)

// onImage is linux_sandbox with every Spec on img: the suites written
// for the host view, run with an image's root and root inside.
type onImage struct {
	*linuxsandbox.Backend
	img backend.Image
}

func (b onImage) Run(ctx context.Context, spec backend.Spec) (backend.Outcome, error) {
	spec.Image = &b.img
	return b.Backend.Run(ctx, spec)
}

func (b onImage) Create(ctx context.Context, spec backend.Spec) (backend.Sandbox, error) {
	spec.Image = &b.img
	return b.Backend.Create(ctx, spec)
}

var _ backend.Sandboxes = onImage{}

// imageSkips are the suites' subtests that do not apply to a root made
// of an image, and why.
var imageSkips = map[string]string{
	"ExecOnlyTheAllowList": "exec_scope every_process is refused on an image (TestImageRefusesWhatCannotHold)",
	"SetuidBinaryGainsNothing": "it copies the host's setuid binaries into the workspace; on an image the root is root already " +
		"(TestImageRootCannotEscape covers what root inside cannot do)",
	"ReadsStayInsideTheView": "it reads the host's own paths (/etc/shadow) that an image has its own copies of; " +
		"TestImageRootCannotEscape reads a host secret",
	"WritesStayInsideTheSnapshot": "root inside writes /, /etc and /usr by design: into the sandbox's own layer " +
		"(TestImageInstallsStayInTheSandbox checks that the image and the host are unchanged after)",
	"KernelInterfacesRefused": "it wants no capability at all; root inside holds exactly imageCaps (TestImageRootInside), " +
		"and the interfaces it tries (ptrace, mount, unshare, setns, chroot) stay refused (TestImageRootCannotEscape)",
}

// imageFactory builds onImage backends on the test image, skipping the
// subtests that do not apply.
func imageFactory(t *testing.T) backendtest.Factory {
	img := backendtest.DebianImage(t)
	img.Env = nil // the suites want the Spec's env exactly (TestImageRootInside merges one)
	return func(t *testing.T) backend.Backend {
		for name, why := range imageSkips {
			if leaf := t.Name(); len(leaf) >= len(name) && leaf[len(leaf)-len(name):] == name {
				t.Skip(why)
			}
		}
		return onImage{imageSandbox(t), img}
	}
}

func TestImageConformance(t *testing.T) { backendtest.Run(t, imageFactory(t)) }

func TestImageAdversarial(t *testing.T) { backendtest.Adversarial(t, imageFactory(t)) }

func TestImageLifecycle(t *testing.T) { backendtest.Lifecycle(t, imageFactory(t)) }
