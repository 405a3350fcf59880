package localprocess_test

import (
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/localprocess"
)

func TestPorts(t *testing.T) {
	backendtest.Ports(t, backendtest.New(localprocess.Kind, backend.Config{}))
}
