package linuxsandbox_test

import (
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/job"
)

// TestCPUQuotaHoldsABusyJob runs two busy processes for 2 s under
// cpu_count 0.25: the job's CPU time stays near a quarter of its wall
// time, where without the quota two cores give it up to twice its wall
// time.
func TestCPUQuotaHoldsABusyJob(t *testing.T) {
	backendtest.NeedLimit(t, sandbox(t), job.LimitCPU)
	start := time.Now()
	out, errs, o := backendtest.Attack(t, sandbox(t), `
import os, time
end = time.time() + 2
pid = os.fork()
while time.time() < end:
    pass
if pid:
    os.waitpid(pid, 0)
    print("done")
`, func(s *backend.Spec) { s.Limits.CPUCount = 0.25 })
	elapsed := time.Since(start)
	if o.Reason != job.ReasonExit || out != "done\n" {
		t.Fatalf("outcome %+v stdout %q stderr %q", o, out, errs)
	}
	// The quota is a quarter of the wall time, counting the
	// interpreter's start. Slack: one period, and 60% for guests under
	// QEMU TCG, whose scheduler clock (TSC) and timers (HPET) drift apart.
	limit := time.Duration(float64(elapsed)*0.25*1.6) + 100*time.Millisecond
	if o.CPUTime > limit || o.CPUTime <= 0 {
		t.Errorf("CPU time %v in %v under cpu_count 0.25 with two busy processes, want (0, %v]", o.CPUTime, elapsed, limit)
	}
}
