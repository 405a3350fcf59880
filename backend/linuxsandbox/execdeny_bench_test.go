package linuxsandbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/policy"
)

// execsPerRun is how many execs BenchmarkDeniedShells's job makes.
const execsPerRun = 200

// BenchmarkDeniedShells prices allow_shell false at every exec: one Run
// of xargs executing /bin/true execsPerRun times, without and with
// Spec.DeniedPrograms (the Landlock rules granted around the view's
// shells, and the seccomp listener that looks at every exec). It reports
// each run's time and the difference per sandbox start and per exec.
func BenchmarkDeniedShells(b *testing.B) {
	sb := benchSandbox(b)
	ctx := context.Background()
	input := strings.Repeat("x\n", execsPerRun)
	one := func(deny bool, argv ...string) time.Duration {
		spec, _, _ := backendtest.Spec(b, argv...)
		spec.Stdin = strings.NewReader(input)
		if deny {
			spec.DeniedPrograms = policy.ShellPrograms()
		}
		t0 := time.Now()
		if o, err := sb.Run(ctx, spec); err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
			b.Fatalf("Run(%q) = %+v, %v", argv, o, err)
		}
		return time.Since(t0)
	}
	var plain, denied, startPlain, startDenied time.Duration
	for b.Loop() {
		startPlain += one(false, "/bin/true")
		startDenied += one(true, "/bin/true")
		plain += one(false, "/usr/bin/xargs", "-n1", "/bin/true")
		denied += one(true, "/usr/bin/xargs", "-n1", "/bin/true")
	}
	n := float64(b.N)
	b.ReportMetric(float64(startPlain.Microseconds())/n, "true-µs/op")
	b.ReportMetric(float64(startDenied.Microseconds())/n, "true-denied-µs/op")
	b.ReportMetric(float64(plain.Microseconds())/n, "xargs-µs/op")
	b.ReportMetric(float64(denied.Microseconds())/n, "xargs-denied-µs/op")
	b.ReportMetric(float64((denied-plain)-(startDenied-startPlain))/n/execsPerRun/1e3, "extra-µs/exec")
}
