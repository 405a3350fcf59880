// Package sandboxpipeline_test runs jobs through the runner's whole
// pipeline on the real linux_sandbox backend: a test binary of its own,
// as package runner's tests keep linux_sandbox unregistered (the default
// backend must not fall back) and the sandbox needs its re-exec hook in
// TestMain.
package sandboxpipeline_test

import (
	"os"
	"testing"

	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
)

func TestMain(m *testing.M) {
	linuxsandbox.MaybeInit()
	os.Exit(m.Run())
}
