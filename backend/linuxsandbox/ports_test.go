package linuxsandbox_test

import (
	"testing"

	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
)

func TestPorts(t *testing.T) {
	backendtest.Ports(t, backendtest.New(linuxsandbox.Kind, suiteConfig()))
}
