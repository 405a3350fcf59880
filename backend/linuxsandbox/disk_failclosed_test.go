package linuxsandbox

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// TestDiskLimitFailsClosed: where the runner cannot make a job's tmpfs
// (here: made to believe it is not root), a job with a disk limit ends
// backend.unavailable before its program runs, unless the operator
// allowed unenforced limits (then it runs on the unlimited snapshot and
// says so); a job without one runs as before, disk unmentioned.
func TestDiskLimitFailsClosed(t *testing.T) {
	if err := newTestBackend(t, backend.Config{}).Available(context.Background()); err != nil {
		t.Skipf("linux_sandbox unavailable here: %v", err)
	}
	old := diskPrivileged
	diskPrivileged = func() bool { return false }
	t.Cleanup(func() { diskPrivileged = old })
	disk := backend.Limits{DiskBytes: 64 << 20, DiskInodes: 1000}
	tests := []struct {
		name        string
		cfg         backend.Config
		lim         backend.Limits
		wantErr     bool
		notEnforced bool // disk listed not_enforced
	}{
		{name: "disk asked", lim: disk, wantErr: true},
		{name: "disk asked, operator allows unenforced", cfg: backend.Config{AllowUnenforcedLimits: true}, lim: disk, notEnforced: true},
		{name: "disk asked, RequireLimits wins", cfg: backend.Config{AllowUnenforcedLimits: true, RequireLimits: true}, lim: disk, wantErr: true},
		{name: "no disk asked", lim: backend.Limits{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBackend(t, tt.cfg)
			spec, marker := markerSpec(t, tt.lim)
			out, err := b.Run(context.Background(), spec)
			_, statErr := os.Stat(marker)
			ran := statErr == nil
			if tt.wantErr {
				je := job.AsError(err)
				if err == nil || je.Code != job.CodeBackendUnavail {
					t.Fatalf("Run() = %+v, %v; want backend.unavailable", out, err)
				}
				if ran {
					t.Error("the program ran although its disk limit could not be applied")
				}
				if !strings.Contains(je.Message, AllowUnenforcedFlag) {
					t.Errorf("error %q does not say how to allow it", je.Message)
				}
				if diff := cmp.Diff([]string{job.LimitDisk}, je.Details["not_enforced"]); diff != "" {
					t.Errorf("details not_enforced (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil || !ran {
				t.Fatalf("Run() = %+v, %v (ran %v); want a run", out, err, ran)
			}
			if out.Release != nil || out.Layers != nil {
				t.Errorf("Run() = Layers %q, Release set %v; want neither without a disk", out.Layers, out.Release != nil)
			}
			got := [2]bool{slices.Contains(out.Enforced, job.LimitDisk), slices.Contains(out.NotEnforced, job.LimitDisk)}
			if want := [2]bool{false, tt.notEnforced}; got != want {
				t.Errorf("disk in enforced, not_enforced = %v, want %v (%q / %q)", got, want, out.Enforced, out.NotEnforced)
			}
		})
	}
}
