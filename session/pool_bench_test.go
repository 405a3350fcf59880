package session_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/session"
)

// BenchmarkWarmCreateExec is the warm path in process, for profiling:
// a create that claims a pooled linux_sandbox, its first exec, its
// delete. Run with -benchtime=Nx, N at most the pool (256).
func BenchmarkWarmCreateExec(b *testing.B) {
	f := newFixture(b, "linux_sandbox", func(c *session.Config) {
		c.Templates = map[string]session.Template{"t": {Pool: min(b.N, session.MaxPool)}}
		c.PoolRefillDelay = time.Hour
		c.MaxSandboxes = 2*session.MaxPool + 8
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := f.s.WaitPools(ctx); err != nil {
		b.Fatal(err)
	}
	var create, exec, cpu time.Duration
	b.ResetTimer()
	for range b.N {
		c0 := cpuTime()
		t0 := time.Now()
		rec, _, err := f.s.Create(ctx, session.CreateRequest{Template: "t"})
		t1 := time.Now()
		create += t1.Sub(t0)
		if err != nil || rec.Start != session.StartWarm {
			b.Fatalf("Create = %s %s, %v", rec.Start, rec.StartReason, err)
		}
		res, err := f.s.Exec(ctx, rec.ID, session.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.Status != job.StatusCompleted {
			b.Fatalf("Exec = %+v, %v", res, err)
		}
		exec += time.Since(t1)
		cpu += cpuTime() - c0
		b.StopTimer()
		f.s.Delete(context.Background(), rec.ID)
		b.StartTimer()
	}
	b.ReportMetric(float64(create.Microseconds())/float64(b.N), "create-µs/op")
	b.ReportMetric(float64(exec.Microseconds())/float64(b.N), "exec-µs/op")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// cpuTime is the CPU time this process used so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
