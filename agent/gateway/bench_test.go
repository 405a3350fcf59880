package gateway

import (
	"context"
	"encoding/json"
	"testing"
)

// BenchmarkInvokeTail is the whole gateway path for a small tail_log:
// count, decode, policy, open through rootfs, read, encode.
func BenchmarkInvokeTail(b *testing.B) {
	e := newEnv(b)
	args := json.RawMessage(`{"path":"allowed/app.log","lines":2}`)
	e.g.policy.Limits.MaxToolCalls = 1 << 62
	for b.Loop() {
		if _, err := e.g.Invoke(context.Background(), "tail_log", args); err != nil {
			b.Fatal(err)
		}
	}
}
