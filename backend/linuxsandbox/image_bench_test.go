package linuxsandbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
)

// BenchmarkImageVsHostView measures Create, one Exec of /bin/true and
// Delete of a sandbox on an image (root inside, an overlay root) and of
// a host-view sandbox, alternating in one run, and reports both and
// their ratio (image-vs-host: 1.0 is the same cost).
func BenchmarkImageVsHostView(b *testing.B) {
	sb := benchSandbox(b)
	img := backendtest.DebianImage(b)
	ctx := context.Background()
	cycle := func(spec backend.Spec) time.Duration {
		t0 := time.Now()
		s, err := sb.Create(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		if o, err := s.Exec(ctx, backend.Exec{Argv: []string{"/bin/true"}}); err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
			b.Fatalf("Exec(/bin/true) = %+v, %v", o, err)
		}
		if err := s.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	var onImage, onHost time.Duration
	for b.Loop() {
		spec, _, _ := imageSpec(b, img, "/bin/true")
		onImage += cycle(spec)
		host, _, _ := backendtest.Spec(b, "/bin/true")
		onHost += cycle(host)
	}
	n := float64(b.N)
	b.ReportMetric(float64(onImage.Microseconds())/n, "image-µs/op")
	b.ReportMetric(float64(onHost.Microseconds())/n, "host-µs/op")
	b.ReportMetric(float64(onImage)/float64(onHost), "image-vs-host")
}
