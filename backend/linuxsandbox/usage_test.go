package linuxsandbox_test

import (
	"sync"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/job"
)

// TestUsageIsSampledWhileRunning holds 48 MiB and burns CPU for a second:
// the live samples see the memory, the CPU time and the processes, and no
// sample arrives after Run returned.
func TestUsageIsSampledWhileRunning(t *testing.T) {
	backendtest.NeedLimit(t, sandbox(t), job.LimitMemory)
	var mu sync.Mutex
	var samples []backend.Usage
	returned := false
	_, errs, o := backendtest.Attack(t, sandbox(t), `
import time
b = bytearray(48 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
end = time.time() + 1.2
while time.time() < end:
    pass
`, func(s *backend.Spec) {
		s.UsageEvery = 100 * time.Millisecond
		s.Usage = func(u backend.Usage) {
			mu.Lock()
			defer mu.Unlock()
			if returned {
				t.Error("usage sample after Run returned")
			}
			samples = append(samples, u)
		}
	})
	mu.Lock()
	returned = true
	got := append([]backend.Usage(nil), samples...)
	mu.Unlock()
	if o.Reason != job.ReasonExit {
		t.Fatalf("outcome %+v %s", o, errs)
	}
	if len(got) < 5 {
		t.Fatalf("%d samples in a 1.2 s run at 100 ms", len(got))
	}
	var maxMem int64
	var maxCPU time.Duration
	for _, u := range got {
		maxMem, maxCPU = max(maxMem, u.MemoryBytes), max(maxCPU, u.CPUTime)
		if u.Processes < 1 {
			t.Errorf("sample without processes: %+v", u)
		}
	}
	if maxMem < 48<<20 {
		t.Errorf("largest live memory sample %d < 48 MiB", maxMem)
	}
	if maxCPU < 50*time.Millisecond { // under load the busy loop may get little CPU; any is proof
		t.Errorf("largest CPU sample %v for a 1.2 s busy loop", maxCPU)
	}
}
