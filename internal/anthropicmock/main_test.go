package anthropicmock

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the mock's and the
// proxy's connections are all closed by their Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
