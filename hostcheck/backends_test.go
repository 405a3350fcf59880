package hostcheck

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// fakeBackend is a backend.Backend whose answers are fields.
type fakeBackend struct {
	kind      string
	caps      backend.Capabilities
	available func(ctx context.Context) error
}

func (f fakeBackend) Kind() string                       { return f.kind }
func (f fakeBackend) Capabilities() backend.Capabilities { return f.caps }
func (f fakeBackend) Available(ctx context.Context) error {
	if f.available == nil {
		return nil
	}
	return f.available(ctx)
}
func (f fakeBackend) Run(context.Context, backend.Spec) (backend.Outcome, error) {
	return backend.Outcome{}, errors.New("fake backend does not run")
}

var _ backend.Backend = fakeBackend{}

// everything is what linux_sandbox enforces as root on a v1 host.
var everything = append(append([]string{}, limits...), walls...)

func without(names ...string) []string {
	var out []string
	for _, l := range everything {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+l+" ") {
			out = append(out, l)
		}
	}
	return out
}

func TestBackendReports(t *testing.T) {
	usable := cgroupFacts{layout: layoutHybrid, create: true, ctrl: map[string]ctrlFacts{"memory": {available: true}, "pids": {available: true}, "cpu": {available: true}}}
	rootHost := hostFacts{uid: 0, landlock: landlockProbe{abi: 7}, cgroups: usable}
	noCgroup := rootHost
	noCgroup.cgroups = cgroupFacts{layout: layoutV2, createFound: "cannot create child groups in /sys/fs/cgroup/user.slice (permission denied)"}
	v2 := rootHost
	v2.cgroups = usable
	v2.cgroups.layout = layoutV2
	unprivileged := rootHost
	unprivileged.uid = 1000
	unprivileged.landlock = landlockProbe{err: errors.New("function not implemented")}

	type ne struct{ limit, why, check string }
	tests := []struct {
		name        string
		b           fakeBackend
		isDefault   bool
		facts       hostFacts
		status      Status
		notEnforced []ne
		fix         string
	}{
		{"default, everything enforced", fakeBackend{kind: "sandbox", caps: backend.Capabilities{Isolating: true, Enforces: everything}}, true, rootHost, StatusOK, nil, ""},
		{"default without a writable cgroup", fakeBackend{kind: "sandbox", caps: backend.Capabilities{Isolating: true, Enforces: without("memory", "cpu", "processes")}}, true, noCgroup, StatusFail, []ne{
			{"memory", "no writable cgroup: cannot create child groups in /sys/fs/cgroup/user.slice (permission denied)", "cgroup_create"},
			{"cpu", "no writable cgroup: cannot create child groups in /sys/fs/cgroup/user.slice (permission denied)", "cgroup_create"},
			{"processes", "no writable cgroup: cannot create child groups in /sys/fs/cgroup/user.slice (permission denied)", "cgroup_create"},
		}, "follow the fix lines of cgroup_create"},
		{"default on a cgroup v2 host it does not limit", fakeBackend{kind: "sandbox", caps: backend.Capabilities{Isolating: true, Enforces: without("memory", "cpu", "processes")}}, true, v2, StatusFail, []ne{
			{"memory", "this host has only cgroup v2, and the backend applies no cgroup v2 limits", "cgroup_layout"},
			{"cpu", "this host has only cgroup v2, and the backend applies no cgroup v2 limits", "cgroup_layout"},
			{"processes", "this host has only cgroup v2, and the backend applies no cgroup v2 limits", "cgroup_layout"},
		}, "follow the fix lines of cgroup_layout"},
		{"default, unprivileged without Landlock", fakeBackend{kind: "sandbox", caps: backend.Capabilities{Isolating: true, Enforces: without("landlock", "host_ids")}}, true, unprivileged, StatusWarn, []ne{
			{"landlock", "the kernel has no Landlock", "landlock"},
			{"host_ids", "the runner is not root: every sandbox runs as the runner's uid", "root"},
		}, "follow the fix lines of landlock, root"},
		{"another isolating backend, unavailable", fakeBackend{kind: "vm", caps: backend.Capabilities{Isolating: true}, available: func(context.Context) error { return errors.New("no vm binary") }}, false, rootHost, StatusInfo, nil, ""},
		{"not isolating", fakeBackend{kind: "local", caps: backend.Capabilities{Enforces: []string{job.LimitTimeout, job.LimitOutput}}}, false, rootHost, StatusInfo, []ne{
			{"network", "the backend does not isolate: jobs run as this process's user on the host and the limit is only recorded", ""},
			{"memory", "the backend does not isolate: jobs run as this process's user on the host and the limit is only recorded", ""},
			{"cpu", "the backend does not isolate: jobs run as this process's user on the host and the limit is only recorded", ""},
			{"processes", "the backend does not isolate: jobs run as this process's user on the host and the limit is only recorded", ""},
			{"filesystem_write", "the backend does not isolate: jobs run as this process's user on the host and the limit is only recorded", ""},
			{"filesystem_read", "the backend does not isolate: jobs run as this process's user on the host and the limit is only recorded", ""},
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := report(tt.b, tt.b.Available(context.Background()), tt.isDefault, tt.facts)
			if r.Status != tt.status || r.Fix != tt.fix {
				t.Errorf("status, fix = %q, %q, want %q, %q", r.Status, r.Fix, tt.status, tt.fix)
			}
			if tt.b.available != nil { // unavailable: every limit, for that reason
				if r.Available || len(r.Enforced) != 0 || len(r.NotEnforced) != len(everything) || !strings.Contains(r.NotEnforced[0].Why, "no vm binary") {
					t.Errorf("unavailable backend report = %+v, want every limit not enforced with its error", r)
				}
				return
			}
			var got []ne
			for _, n := range r.NotEnforced {
				got = append(got, ne{n.Limit, n.Why, n.Check})
			}
			if diff := cmp.Diff(tt.notEnforced, got, cmp.AllowUnexported(ne{})); diff != "" {
				t.Errorf("not enforced (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSandboxProbe(t *testing.T) {
	refused := errors.New("cannot create the sandbox namespaces: fork/exec /proc/self/exe: operation not permitted")
	b := fakeBackend{kind: "sandbox", caps: backend.Capabilities{Isolating: true, Enforces: everything}, available: func(context.Context) error { return refused }}
	checks := []Check{{Name: "apparmor_restrict_unprivileged_userns", Status: StatusFail}, {Name: "landlock", Status: StatusWarn}}
	reports, probe := probeBackends(context.Background(), Options{Backends: []backend.Backend{b}, DefaultBackend: "sandbox", ProbeTimeout: time.Second}, hostFacts{}, checks)
	if want := "sandbox's probe failed: " + refused.Error(); probe.Status != StatusFail || probe.Found != want {
		t.Errorf("probe = %q %q, want fail %q (the error verbatim)", probe.Status, probe.Found, want)
	}
	if want := "fix the failed checks above (apparmor_restrict_unprivileged_userns)"; probe.Fix != want {
		t.Errorf("probe fix = %q, want %q", probe.Fix, want)
	}
	if len(reports) != 1 || reports[0].Status != StatusFail || reports[0].Error != refused.Error() {
		t.Errorf("reports = %+v, want the default backend failed with its error", reports)
	}
}

func TestSandboxProbeTimesOut(t *testing.T) {
	b := fakeBackend{kind: "sandbox", caps: backend.Capabilities{Isolating: true}, available: func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	_, probe := probeBackends(context.Background(), Options{Backends: []backend.Backend{b}, DefaultBackend: "sandbox", ProbeTimeout: 50 * time.Millisecond}, hostFacts{}, nil)
	if probe.Status != StatusFail || !strings.Contains(probe.Found, "probe did not answer within 50ms") {
		t.Errorf("probe = %q %q, want fail naming the timeout", probe.Status, probe.Found)
	}
}

func TestSandboxProbeMissingDefault(t *testing.T) {
	_, probe := probeBackends(context.Background(), Options{DefaultBackend: "sandbox"}, hostFacts{}, nil)
	if probe.Status != StatusFail || !strings.Contains(probe.Found, `"sandbox" is not built into this binary`) {
		t.Errorf("probe = %q %q, want fail: not built in", probe.Status, probe.Found)
	}
}
