package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/localprocess"
	"github.com/agent-runner/agent-runner/job"
	"github.com/agent-runner/agent-runner/policy"
	"github.com/agent-runner/agent-runner/runner"
)

// openSandbox opens a local_process sandbox over f's workspace, closed
// when the test ends.
func openSandbox(t *testing.T, f *fixture, spec runner.SandboxSpec) *runner.Sandbox {
	t.Helper()
	spec.Workspace = f.ws
	spec.Backend = &countingBackend{}
	sb, err := f.r.OpenSandbox(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// TestStepsShareASandbox: two steps in one sandbox are processes of it:
// a background process the first left is alive for the second, both
// records name the sandbox and hold the sandbox's limits and network in
// their request, no one-shot run is made, and Close kills what is left.
func TestStepsShareASandbox(t *testing.T) {
	f := newFixture(t, nil)
	sb := openSandbox(t, f, runner.SandboxSpec{ID: "t1.sandbox", Limits: job.Limits{MemoryMB: 256, CPUCount: 1, MaxProcesses: 64, TmpMB: 16}})
	step := &runner.Step{Sandbox: sb}
	first, err := f.r.Step(context.Background(), stepRequest(f.ws, "t1.agent",
		[]string{"sh", "-c", `sleep 1000 >/dev/null 2>&1 & echo $! >bg.pid`}, "sh"), runner.Options{Step: step})
	if err != nil || first.Status != job.StatusCompleted {
		t.Fatalf("first step = %s %+v, %v", first.Status, first.Error, err)
	}
	raw, err := os.ReadFile(filepath.Join(f.ws, "bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("the first step's background process is gone after it: %v", err)
	}
	defer unix.Close(pidfd)
	second, err := f.r.Step(context.Background(), stepRequest(f.ws, "t1.collect",
		[]string{"sh", "-c", `kill -0 "$(cat bg.pid)" && echo alive`}, "sh"), runner.Options{Step: step})
	if err != nil || second.Status != job.StatusCompleted || second.Stdout.Text != "alive\n" {
		t.Fatalf("second step = %s %q %+v, %v; want completed, seeing the first one's process", second.Status, second.Stdout.Text, second.Error, err)
	}
	for _, res := range []job.Result{first, second} {
		if res.Sandbox != "t1.sandbox" {
			t.Errorf("%s: sandbox = %q, want t1.sandbox", res.JobID, res.Sandbox)
		}
		stored, err := f.r.Store().ReadResult(res.JobID)
		if err != nil || stored.Sandbox != "t1.sandbox" {
			t.Errorf("%s: recorded sandbox = %q, %v", res.JobID, stored.Sandbox, err)
		}
		req, err := f.r.Store().ReadRequest(res.JobID)
		if err != nil || req.Limits.MemoryMB != 256 || req.Limits.MaxProcesses != 64 || req.Policy.Network != job.NetworkDisabled {
			t.Errorf("%s: recorded request limits %+v network %q, %v; want the sandbox's", res.JobID, req.Limits, req.Policy.Network, err)
		}
	}
	if b := sb.Backend().(*countingBackend); b.runs != 0 {
		t.Errorf("one-shot runs = %d, want 0 (every step a process of the sandbox)", b.runs)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	// Readable once the process has ended: blocks until Close's kill lands.
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			break
		}
	}
	if fds[0].Revents&unix.POLLIN == 0 {
		t.Errorf("the background process outlived Close (revents %#x)", fds[0].Revents)
	}
	after, err := f.r.Step(context.Background(), stepRequest(f.ws, "t1.after", []string{"true"}, "true"), runner.Options{Step: step})
	if err != nil {
		t.Fatal(err)
	}
	if after.Status == job.StatusCompleted || after.Termination != nil {
		t.Errorf("a step in a closed sandbox = %s, termination %+v; want it refused", after.Status, after.Termination)
	}
}

// runOnly is local_process without its sandbox lifecycle.
type runOnly struct{ backend.Backend }

// TestSharedSandboxRefusesExecConfinement: a step whose policy confines
// every exec (allow_shell false) cannot be one process of a shared
// sandbox, which holds no such confinement: it ends backend_unavailable
// before anything runs.
func TestSharedSandboxRefusesExecConfinement(t *testing.T) {
	f := newFixture(t, nil)
	sb := openSandbox(t, f, runner.SandboxSpec{ID: "t2.sandbox"})
	req := stepRequest(f.ws, "t2.agent", []string{"sh", "-c", "echo ran >ran.txt"}, "sh")
	req.Policy.AllowShell = false
	req.Command.Argv = []string{"touch", "ran.txt"}
	req.Policy.AllowedCommands = []job.CommandRule{{Basename: "touch"}}
	res, err := f.r.Step(context.Background(), req, runner.Options{Step: &runner.Step{Sandbox: sb}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != job.StatusBackendUnavailable || code(res) != job.CodeBackendUnavail {
		t.Errorf("confined step = %s %q, want backend_unavailable %s", res.Status, code(res), job.CodeBackendUnavail)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "ran.txt")); err == nil {
		t.Errorf("the confined step ran unconfined")
	}
}

// TestOpenSandboxNeedsSandboxes: a backend without a sandbox lifecycle
// cannot hold one.
func TestOpenSandboxNeedsSandboxes(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.r.OpenSandbox(context.Background(), runner.SandboxSpec{ID: "t3.sandbox", Workspace: f.ws, Backend: runOnly{localprocess.Backend{}}})
	if job.CodeOf(err) != job.CodeBackendUnavail {
		t.Errorf("OpenSandbox on a run-only backend = %v, want %s", err, job.CodeBackendUnavail)
	}
}

// TestSandboxDenyingShellsTakesShellFreeSteps: a sandbox that denies the
// shells to all its processes (SandboxSpec.DeniedPrograms) runs a step
// whose policy denies them (allow_shell false), and its record says
// whether the backend enforced the denial (local_process does not).
func TestSandboxDenyingShellsTakesShellFreeSteps(t *testing.T) {
	f := newFixture(t, nil)
	sb := openSandbox(t, f, runner.SandboxSpec{ID: "t4.sandbox", DeniedPrograms: policy.ShellPrograms()})
	req := stepRequest(f.ws, "t4.call-1", []string{"touch", "ran.txt"}, "touch")
	req.Policy.AllowShell = false
	res, err := f.r.Step(context.Background(), req, runner.Options{Step: &runner.Step{Sandbox: sb}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != job.StatusCompleted || res.Sandbox != "t4.sandbox" {
		t.Fatalf("step = %s %+v in %q, want completed in t4.sandbox", res.Status, res.Error, res.Sandbox)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "ran.txt")); err != nil {
		t.Errorf("the step did not run: %v", err)
	}
	if res.Enforcement == nil || !slices.Contains(res.Enforcement.NotEnforced, job.LimitShells) {
		t.Errorf("enforcement = %+v, want shells not enforced on local_process", res.Enforcement)
	}
}

// TestSandboxEgressHoldsTheOperatorsNetwork: a sandbox's network is held
// to the operator's settings as a job's: host needs AllowHostNetwork,
// an allowlist the egress ceiling; disabled opens no bridge.
func TestSandboxEgressHoldsTheOperatorsNetwork(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		p    job.Policy
		want job.Code
	}{
		{job.Policy{Network: job.NetworkDisabled}, ""},
		{job.Policy{Network: job.NetworkHost}, job.CodeNetworkDenied},
		{job.Policy{Network: job.NetworkAllowlist, AllowedHosts: []string{"example.com:443"}}, job.CodeNetworkDenied},
	} {
		br, stop, err := f.r.SandboxEgress(context.Background(), "t5.sandbox", tc.p, nil)
		if job.CodeOf(err) != tc.want || br != nil {
			t.Errorf("SandboxEgress(%q) = %v, %v; want no bridge, code %q", tc.p.Network, br, err, tc.want)
		}
		if stop != nil {
			stop()
		}
	}
}

// createSpy is local_process keeping the Spec of the sandbox it created.
type createSpy struct {
	localprocess.Backend
	spec backend.Spec
}

func (b *createSpy) Create(ctx context.Context, spec backend.Spec) (backend.Sandbox, error) {
	b.spec = spec
	return b.Backend.Create(ctx, spec)
}

// TestSandboxLimitsDefaultAsARunsDo: a sandbox opened without limits
// gets the limits a run without them would, so that what a step in it
// records as its limits is what the sandbox holds.
func TestSandboxLimitsDefaultAsARunsDo(t *testing.T) {
	f := newFixture(t, nil)
	spy := &createSpy{}
	sb, err := f.r.OpenSandbox(context.Background(), runner.SandboxSpec{ID: "t6.sandbox", Workspace: f.ws, Backend: spy, Limits: job.Limits{MemoryMB: 300}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	want := backend.Limits{MemoryBytes: 300 << 20, CPUCount: 2, MaxProcesses: 256, TmpBytes: 1024 << 20, KillGrace: spy.spec.Limits.KillGrace}
	if diff := cmp.Diff(want, spy.spec.Limits); diff != "" {
		t.Errorf("sandbox limits (-want +got):\n%s", diff)
	}
	res, err := f.r.Step(context.Background(), stepRequest(f.ws, "t6.call-1", []string{"true"}, "true"), runner.Options{Step: &runner.Step{Sandbox: sb}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := f.r.Store().ReadRequest(res.JobID)
	if err != nil || req.Limits.MemoryMB != 300 || req.Limits.CPUCount != 2 || req.Limits.MaxProcesses != 256 || req.Limits.TmpMB != 1024 {
		t.Errorf("recorded limits %+v, %v; want the sandbox's", req.Limits, err)
	}
}
