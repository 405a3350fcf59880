package localprocess_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/localprocess"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) { backendtest.Run(t, localprocess.Backend{}) }
