package gateway

import (
	"testing"

	"go.uber.org/goleak"
)

// Subprocess tools run jobs; no goroutine may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
