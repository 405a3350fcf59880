package linuxsandbox

import (
	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Limits fail closed: a job that asks for a memory, CPU or process limit
// runs in a cgroup that holds it, or does not run. The sandbox init waits
// for its config until the runner has placed it in its cgroups, so a
// refusal here comes before any workload code. The operator who accepts
// unenforced limits says so (backend.Config.AllowUnenforcedLimits, the
// doors' --allow-unenforced-limits), and the run reports them
// not_enforced. A disk limit (limits.disk_mb) fails closed the same way:
// a runner that cannot make the job's tmpfs (not root) refuses the job
// unless the operator allowed unenforced limits.

// AllowUnenforcedFlag is the doors' flag that sets
// backend.Config.AllowUnenforcedLimits (and runner.Config's).
const AllowUnenforcedFlag = "--allow-unenforced-limits"

// cgroupHost is where the backend creates its cgroups.
func (b *Backend) cgroupHost() cgroupHost {
	if b.cgroups != nil {
		return *b.cgroups
	}
	return selfCgroups()
}

// askedLimits names the cgroup limits lim asks for (job.Limit*).
func askedLimits(lim backend.Limits) []string {
	var asked []string
	if lim.MemoryBytes > 0 {
		asked = append(asked, job.LimitMemory)
	}
	if lim.CPUCount > 0 {
		asked = append(asked, job.LimitCPU)
	}
	if lim.MaxProcesses > 0 {
		asked = append(asked, job.LimitProcesses)
	}
	return asked
}

// refuseUnlimited is the error that ends a run whose cgroups could not be
// created (cause), or nil where it may run without them: no limit was
// asked for (the group only measured usage), or the operator allowed
// unenforced limits. RequireLimits refuses even a run that asked for none.
func (b *Backend) refuseUnlimited(lim backend.Limits, cause error) error {
	asked := askedLimits(lim)
	switch {
	case b.requireLimits:
	case len(asked) == 0 || b.allowUnenforced:
		return nil
	}
	return job.Errorf(job.CodeBackendUnavail,
		"linux_sandbox cannot apply the job's cgroup limits (%v), so the job did not run: give the runner a cgroup it can create groups in (docs/operations.md, \"Giving the runner a cgroup\"), or accept unenforced limits with %s", cause, AllowUnenforcedFlag).
		With("backend", Kind).With("reason", cause.Error()).With("not_enforced", asked)
}

// newDisk makes the job's size-limited workspace (disk.go): nil without a
// disk limit, or where it cannot be made and the operator allowed
// unenforced limits (the run reports disk not_enforced); otherwise a
// refusal (backend.unavailable) before any workload code runs.
func (b *Backend) newDisk(lim backend.Limits) (*workspaceDisk, error) {
	if lim.DiskBytes <= 0 {
		return nil, nil
	}
	d, cause := newDisk(lim)
	switch {
	case cause == nil:
		return d, nil
	case b.allowUnenforced && !b.requireLimits:
		return nil, nil
	}
	return nil, job.Errorf(job.CodeBackendUnavail,
		"linux_sandbox cannot apply the job's disk limit (%v), so the job did not run: run the runner as root, or accept unenforced limits with %s", cause, AllowUnenforcedFlag).
		With("backend", Kind).With("reason", cause.Error()).With("not_enforced", []string{job.LimitDisk})
}
