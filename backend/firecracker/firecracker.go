// Package firecracker reserves the firecracker backend kind. No microVM
// backend exists yet on the project's machines (there is no firecracker
// binary and KVM guests do not boot here; see docs/backends.md), so it
// reports backend.unavailable with the concrete reason it found, and Run
// never executes anything.
package firecracker

import (
	"context"
	"errors"
	"os"
	"os/exec"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Kind is the backend name.
const Kind = "firecracker"

func init() {
	backend.RegisterFactory(Kind, func(cfg backend.Config) (backend.Backend, error) { return New(cfg) })
}

// Backend is the firecracker placeholder backend.
type Backend struct{}

var _ backend.Backend = Backend{}

// New returns the placeholder. It runs nothing, so there is nothing of
// cfg to apply; a microVM backend would give its guest cfg's view.
func New(backend.Config) (Backend, error) { return Backend{}, nil }

// Kind implements backend.Backend.
func (Backend) Kind() string { return Kind }

// Capabilities implements backend.Backend.
func (Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Isolating: true, Placeholder: true}
}

// Available reports why firecracker cannot run here.
func (Backend) Available(context.Context) error {
	if _, err := exec.LookPath("firecracker"); err != nil {
		return errors.New("firecracker binary not found on PATH")
	}
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err != nil {
		return errors.New("/dev/kvm is not accessible: " + err.Error())
	} else {
		f.Close()
	}
	return errors.New("the firecracker microVM backend is not implemented in this build")
}

// Run always refuses with backend.unavailable.
func (b Backend) Run(ctx context.Context, _ backend.Spec) (backend.Outcome, error) {
	return backend.Outcome{}, job.Wrap(job.CodeBackendUnavail, b.Available(ctx), "firecracker backend is unavailable").
		With("backend", Kind)
}
