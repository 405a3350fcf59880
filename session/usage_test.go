package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/session"
)

// TestUsagePausedCPU: a live sandbox answers its usage (linux_sandbox
// reads its cgroup); a busy loop's CPU time grows while it runs, stays
// the same while the sandbox is paused, and grows again once resumed.
// An ended sandbox keeps its last usage; local_process reads none.
func TestUsagePausedCPU(t *testing.T) {
	f := newFixture(t, "linux_sandbox", nil)
	id := f.create(t, session.CreateRequest{}).ID
	ctx := context.Background()
	if _, err := f.s.StartProcess(ctx, id, session.ProcessRequest{Argv: []string{"sh", "-c", "while :; do :; done"}}); err != nil {
		t.Fatal(err)
	}
	first := usage(t, f, id)
	if first.Processes < 1 || first.MemoryBytes <= 0 {
		t.Errorf("usage = %+v; want processes and memory", first)
	}
	grows(t, f, id, first.CPUTimeMS)
	if _, err := f.s.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	paused := usage(t, f, id)
	// The loop would burn most of a CPU in this time were it thawed.
	time.Sleep(300 * time.Millisecond)
	if again := usage(t, f, id); again.CPUTimeMS != paused.CPUTimeMS {
		t.Errorf("paused CPU time moved from %d ms to %d ms", paused.CPUTimeMS, again.CPUTimeMS)
	}
	if _, err := f.s.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	grows(t, f, id, paused.CPUTimeMS)
	rec, err := f.s.Delete(context.Background(), id)
	if err != nil || rec.Usage == nil || rec.Usage.CPUTimeMS <= paused.CPUTimeMS {
		t.Errorf("Delete = usage %+v, %v; want the last usage kept", rec.Usage, err)
	}

	lp := newFixture(t, "local_process", nil)
	if rec, err := lp.s.Get(lp.create(t, session.CreateRequest{}).ID); err != nil || rec.Usage != nil {
		t.Errorf("local_process Get = usage %+v, %v; want none", rec.Usage, err)
	}
}

// usage is sandbox id's usage now, failing the test when it has none.
func usage(t *testing.T, f *fixture, id string) session.Usage {
	t.Helper()
	rec, err := f.s.Get(id)
	if err != nil || rec.Usage == nil {
		t.Fatalf("Get(%s) = usage %v, %v; want usage", id, rec.Usage, err)
	}
	return *rec.Usage
}

// grows waits until sandbox id's CPU time passes from (a minute at most).
func grows(t *testing.T, f *fixture, id string, from int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if usage(t, f, id).CPUTimeMS > from+50 {
			return
		}
	}
	t.Fatalf("CPU time of %s did not grow past %d ms", id, from)
}
