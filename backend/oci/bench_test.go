package oci_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/linuxsandbox"
	"github.com/agent-runner/agent-runner/backend/oci"
)

// TestMain hooks linux_sandbox's init into the test binary, for the
// comparison benchmark.
func TestMain(m *testing.M) {
	linuxsandbox.MaybeInit()
	os.Exit(m.Run())
}

// statLoop is a syscall-heavy workload: 200,000 stat calls from python3
// (one interpreter start, then nothing but stat).
const statLoop = "import os\nfor _ in range(200000): os.stat('/workspace')\n"

// BenchmarkCompare measures, in one run and per iteration, on runc,
// runsc and linux_sandbox's host view: start (Create and a first Exec
// of /bin/true) and the stat loop in a live sandbox; it reports each in
// ms and as a ratio to linux_sandbox.
//
//	go test -run '^$' -bench Compare -benchtime 5x ./backend/oci/
func BenchmarkCompare(b *testing.B) {
	ctx := context.Background()
	type target struct {
		name string
		sbs  backend.Sandboxes
	}
	ls, err := backend.New("linux_sandbox", backend.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := ls.Available(ctx); err != nil {
		b.Skipf("linux_sandbox is unavailable here: %v", err)
	}
	targets := []target{{"linux_sandbox", ls.(backend.Sandboxes)}}
	for _, rt := range oci.Runtimes {
		targets = append(targets, target{rt, imaged{Backend: newBackend(b, rt), rt: rt, img: testImage(b)}})
	}
	start := make([]time.Duration, len(targets))
	stat := make([]time.Duration, len(targets))
	for b.Loop() {
		for i, tg := range targets {
			spec, _, _ := backendtest.Spec(b, "/bin/true")
			t0 := time.Now()
			sb, err := tg.sbs.Create(ctx, spec)
			if err != nil {
				b.Fatalf("%s: Create: %v", tg.name, err)
			}
			if o, err := sb.Exec(ctx, backend.Exec{Argv: []string{"/bin/true"}}); err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
				b.Fatalf("%s: /bin/true = %+v, %v", tg.name, o, err)
			}
			t1 := time.Now()
			var errb backendtest.Buffer
			if o, err := sb.Exec(ctx, backend.Exec{Argv: []string{"/usr/bin/python3", "-c", statLoop}, Stderr: &errb}); err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
				b.Fatalf("%s: stat loop = %+v, %v: %s", tg.name, o, err, errb.String())
			}
			t2 := time.Now()
			sb.Delete(ctx)
			start[i] += t1.Sub(t0)
			stat[i] += t2.Sub(t1)
		}
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	for i, tg := range targets {
		b.ReportMetric(ms(start[i]), tg.name+"-start-ms")
		b.ReportMetric(ms(stat[i]), tg.name+"-stat-ms")
		if i > 0 {
			b.ReportMetric(float64(start[i])/float64(start[0]), tg.name+"/ls-start-x")
			b.ReportMetric(float64(stat[i])/float64(stat[0]), tg.name+"/ls-stat-x")
		}
	}
}
