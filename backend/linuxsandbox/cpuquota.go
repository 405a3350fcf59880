package linuxsandbox

import (
	"path/filepath"
)

// On cgroup v1 the kernel refuses (EINVAL) a group's cpu.cfs_quota_us
// above the bandwidth of its nearest ancestor with a quota: a runner in a
// systemd unit with CPUQuota=50% cannot give a job cpu_count 2. The job's
// quota is clamped to the ceiling instead, so the job runs with the
// runner's own CPU limit rather than with none. (cgroup v2 accepts any
// cpu.max and throttles a group at its ancestors' limits on its own.)

// minQuotaUsec is the smallest cfs_quota_us the kernel accepts.
const minQuotaUsec = 1000

// clampV1Quota returns quota (per cpuPeriodUsec), lowered to the CPU
// bandwidth of own, the runner's cpu group, and each of its ancestors
// that has a quota.
func clampV1Quota(own string, quota int64) int64 {
	if ceiling, ok := v1QuotaCeiling(own); ok && quota > ceiling {
		quota = ceiling
	}
	return max(quota, minQuotaUsec)
}

// v1QuotaCeiling is the least CPU bandwidth, in microseconds per
// cpuPeriodUsec, of dir and its ancestors up to the hierarchy's root
// (the first directory without cpu.cfs_quota_us); ok is false where none
// has a quota (-1).
func v1QuotaCeiling(dir string) (ceiling int64, ok bool) {
	for d := dir; d != "" && d != "/" && d != "."; d = filepath.Dir(d) {
		q, err := readIntErr(filepath.Join(d, "cpu.cfs_quota_us"))
		if err != nil {
			break
		}
		if q <= 0 {
			continue
		}
		period := readInt(filepath.Join(d, "cpu.cfs_period_us"))
		if period <= 0 {
			continue
		}
		c := q * cpuPeriodUsec / period
		if !ok || c < ceiling {
			ceiling, ok = c, true
		}
	}
	return ceiling, ok
}
