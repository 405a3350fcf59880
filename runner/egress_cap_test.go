package runner

import (
	"testing"

	"github.com/agent-runner/agent-runner/egress"
	"github.com/agent-runner/agent-runner/job"
)

// egress.jsonl takes an eighth of max_run_record_bytes, at most the
// gateway's default audit cap.
func TestEgressRecordBytes(t *testing.T) {
	for _, tc := range []struct {
		record, want int64
	}{
		{0, egress.DefaultMaxAuditBytes},
		{64 << 20, egress.DefaultMaxAuditBytes},
		{4 << 30, egress.DefaultMaxAuditBytes},
		{1 << 20, 128 << 10},
		{7, 1},
	} {
		if got := egressRecordBytes(job.Limits{MaxRunRecordBytes: tc.record}); got != tc.want {
			t.Errorf("egressRecordBytes(max_run_record_bytes %d) = %d, want %d", tc.record, got, tc.want)
		}
	}
}
