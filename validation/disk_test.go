package validation

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/job"
)

// TestDiskLimits checks limits.disk_mb and disk_inodes: no cap unless
// asked or defaulted by the runner, an inode cap derived from the size,
// and an inode cap alone refused.
func TestDiskLimits(t *testing.T) {
	type disk struct{ MB, Inodes int64 }
	tests := []struct {
		name     string
		req      disk
		defaults job.Limits
		max      job.Limits
		want     disk
		code     job.Code
	}{
		{name: "none asked: unlimited as before", want: disk{}},
		{name: "size derives inodes", req: disk{MB: 64}, want: disk{64, 8192}},
		{name: "small size keeps the minimum inodes", req: disk{MB: 1}, want: disk{1, MinDefaultDiskInodes}},
		{name: "explicit inodes", req: disk{MB: 64, Inodes: 100}, want: disk{64, 100}},
		{name: "runner default size", defaults: job.Limits{DiskMB: 512}, want: disk{512, 65536}},
		{name: "runner default inodes", req: disk{MB: 64}, defaults: job.Limits{DiskInodes: 500}, want: disk{64, 500}},
		{name: "runner default inodes alone caps nothing", defaults: job.Limits{DiskInodes: 500}, want: disk{}},
		{name: "derived inodes capped by the maximum", req: disk{MB: 64}, max: job.Limits{DiskInodes: 1000}, want: disk{64, 1000}},
		{name: "inodes alone", req: disk{Inodes: 100}, code: job.CodeInvalidRequest},
		{name: "over the runner maximum", req: disk{MB: 2048}, max: job.Limits{DiskMB: 1024}, code: job.CodeLimitExceeded},
		{name: "negative", req: disk{MB: -1}, code: job.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			c.Defaults, c.Max = tt.defaults, tt.max
			r := base(t)
			r.Limits.DiskMB, r.Limits.DiskInodes = tt.req.MB, tt.req.Inodes
			err := Request(&r, c)
			if got := job.CodeOf(err); got != tt.code {
				t.Fatalf("Request: %v, want code %q", err, tt.code)
			}
			if tt.code != "" {
				return
			}
			got := disk{r.Limits.DiskMB, r.Limits.DiskInodes}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("disk limits (-want +got):\n%s", diff)
			}
			// Validating again changes nothing (a worker re-validates).
			again := r
			if err := Request(&again, c); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(r.Limits, again.Limits); diff != "" {
				t.Errorf("second validation changed the limits (-first +second):\n%s", diff)
			}
		})
	}
}
