package hostcheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// BackendReport is what one backend will enforce on this host.
type BackendReport struct {
	Kind      string `json:"kind"`
	Default   bool   `json:"default"`
	Isolating bool   `json:"isolating"`
	// Available is the backend's own probe (Backend.Available); Error is
	// its answer, verbatim, when it failed.
	Available bool   `json:"available"`
	Error     string `json:"error,omitempty"`
	// Status is fail only for the default backend, when it is unavailable
	// or cannot enforce a required limit (RequiredLimits).
	Status      Status        `json:"status"`
	Enforced    []string      `json:"enforced"`
	NotEnforced []NotEnforced `json:"not_enforced"`
	Fix         string        `json:"fix,omitempty"`
}

// NotEnforced is a limit a backend will not enforce here, and why.
type NotEnforced struct {
	Limit string `json:"limit"`
	Why   string `json:"why"`
	// Check names the check whose fix would change this, if any.
	Check string `json:"check,omitempty"`
}

// RequiredLimits are the limits the default backend must enforce for
// doctor to pass: the ones the runner's RequireEnforcement insists on.
var RequiredLimits = []string{job.LimitTimeout, job.LimitOutput, job.LimitNetwork, job.LimitMemory, job.LimitProcesses, job.LimitFSWrite}

// limits are the job limits every backend is reported on; walls are the
// further ones reported for isolating backends.
var (
	limits = []string{job.LimitTimeout, job.LimitOutput, job.LimitNetwork, job.LimitMemory, job.LimitCPU, job.LimitProcesses, job.LimitFSWrite, job.LimitFSRead}
	walls  = []string{job.LimitSyscalls, job.LimitLandlock, job.LimitHostIDs}
)

// hostFacts are the probe results that explain a limit not enforced.
type hostFacts struct {
	uid      int
	landlock landlockProbe
	cgroups  cgroupFacts
}

// probeBackends asks every backend whether it can run here (each within
// opt.ProbeTimeout) and what it enforces, and makes the sandbox check of
// the default backend's probe.
func probeBackends(ctx context.Context, opt Options, facts hostFacts, checks []Check) ([]BackendReport, Check) {
	var failed []string
	for _, c := range checks {
		if c.Status == StatusFail {
			failed = append(failed, c.Name)
		}
	}
	probe := Check{Section: SectionSandbox, Name: "sandbox_probe", Status: StatusFail,
		Found: fmt.Sprintf("the default backend %q is not built into this binary", opt.DefaultBackend),
		Fix:   "use a build of agent-runner that includes it"}
	var reports []BackendReport
	for _, b := range opt.Backends {
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, opt.ProbeTimeout)
		err := b.Available(pctx)
		if err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("probe did not answer within %s: %w", opt.ProbeTimeout, err)
		}
		cancel()
		r := report(b, err, b.Kind() == opt.DefaultBackend, facts)
		if r.Default {
			probe = sandboxProbe(r, time.Since(start), failed)
		}
		reports = append(reports, r)
	}
	return reports, probe
}

// report is one backend's row.
func report(b backend.Backend, availErr error, isDefault bool, facts hostFacts) BackendReport {
	caps := b.Capabilities()
	r := BackendReport{Kind: b.Kind(), Default: isDefault, Isolating: caps.Isolating, Available: availErr == nil, Enforced: []string{}, NotEnforced: []NotEnforced{}}
	if availErr != nil {
		r.Error = availErr.Error()
	}
	all := limits
	if caps.Isolating {
		all = append(slices.Clone(limits), walls...)
	}
	for _, l := range all {
		if r.Available && slices.Contains(caps.Enforces, l) {
			r.Enforced = append(r.Enforced, l)
			continue
		}
		why, check := whyNot(l, r, facts)
		r.NotEnforced = append(r.NotEnforced, NotEnforced{Limit: l, Why: why, Check: check})
	}
	for _, l := range caps.Enforces { // limits this report does not know yet
		if r.Available && !slices.Contains(all, l) {
			r.Enforced = append(r.Enforced, l)
		}
	}
	r.Status, r.Fix = backendStatus(r)
	return r
}

// whyNot explains a limit the backend will not enforce, naming the check
// that covers it when there is one.
func whyNot(limit string, r BackendReport, f hostFacts) (string, string) {
	switch {
	case !r.Available && r.Default:
		return "the backend is unavailable here: " + r.Error, "sandbox_probe"
	case !r.Available:
		return "the backend is unavailable here: " + r.Error, ""
	case !r.Isolating:
		return "the backend does not isolate: jobs run as this process's user on the host and the limit is only recorded", ""
	}
	switch limit {
	case job.LimitMemory:
		return f.cgroups.why("memory")
	case job.LimitProcesses:
		return f.cgroups.why("pids")
	case job.LimitCPU:
		return f.cgroups.why("cpu")
	case job.LimitLandlock:
		if f.landlock.abi == 0 {
			return "the kernel has no Landlock", "landlock"
		}
	case job.LimitHostIDs:
		if f.uid != 0 {
			return "the runner is not root: every sandbox runs as the runner's uid", "root"
		}
	}
	return "the backend does not enforce it on this host", ""
}

// why explains a cgroup limit not enforced.
func (f cgroupFacts) why(ctrl string) (string, string) {
	switch {
	case f.layout == layoutNone:
		return "no cgroup filesystem is mounted", "cgroup_layout"
	case !f.create:
		return "no writable cgroup: " + f.createFound, "cgroup_create"
	case !f.ctrl[ctrl].available:
		return "the " + ctrl + " controller is not available to the runner's group", "cgroup_" + ctrl
	case f.layout == layoutV2:
		return "this host has only cgroup v2, and the backend applies no cgroup v2 limits", "cgroup_layout"
	}
	return "the backend does not enforce it although the " + ctrl + " controller is usable", ""
}

// backendStatus: only the default backend fails or warns; another one is
// ok when it is an available isolating backend and info otherwise.
func backendStatus(r BackendReport) (Status, string) {
	if !r.Default {
		if r.Available && r.Isolating {
			return StatusOK, ""
		}
		return StatusInfo, ""
	}
	if !r.Available {
		return StatusFail, "follow the fix line of sandbox_probe"
	}
	var required, checks []string
	for _, n := range r.NotEnforced {
		if slices.Contains(RequiredLimits, n.Limit) {
			required = append(required, n.Limit)
		}
		if n.Check != "" && !slices.Contains(checks, n.Check) {
			checks = append(checks, n.Check)
		}
	}
	fix := "no change to this host makes the backend enforce " + limitNames(r.NotEnforced)
	if len(checks) > 0 {
		fix = "follow the fix lines of " + strings.Join(checks, ", ")
	}
	switch {
	case len(required) > 0:
		return StatusFail, fix
	case len(r.NotEnforced) > 0:
		return StatusWarn, fix
	}
	return StatusOK, ""
}

// sandboxProbe is the default backend's own probe as a check: its error
// verbatim, and the failed checks that explain it.
func sandboxProbe(r BackendReport, took time.Duration, failed []string) Check {
	c := Check{Section: SectionSandbox, Name: "sandbox_probe"}
	if r.Available {
		c.Status, c.Found = StatusOK, fmt.Sprintf("%s's probe passed in %s", r.Kind, took.Round(time.Millisecond))
		return c
	}
	c.Status, c.Found = StatusFail, r.Kind+"'s probe failed: "+r.Error
	if len(failed) > 0 {
		c.Fix = "fix the failed checks above (" + strings.Join(failed, ", ") + ")"
	} else {
		c.Fix = "the error is the host's answer to creating the sandbox; until it is fixed, only --default-backend local_process --unsafe-local-process runs jobs (without isolation)"
	}
	return c
}

func limitNames(ns []NotEnforced) string {
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = n.Limit
	}
	return strings.Join(names, ", ")
}
