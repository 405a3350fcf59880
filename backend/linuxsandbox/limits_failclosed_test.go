package linuxsandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// failingHost is a cgroup host whose groups cannot be created: its
// hierarchies are mounted at directories that do not exist.
func failingHost(t *testing.T) *cgroupHost {
	h, _ := fakeHost(t, strings.ReplaceAll(v1Mounts, "ROOT", "ROOT/missing"), v1Membership)
	return &h
}

// markerSpec runs a program that leaves a marker in its workspace.
func markerSpec(t *testing.T, lim backend.Limits) (backend.Spec, string) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		os.Chmod(d, 0o755)
	}
	lim.Timeout, lim.TmpBytes = 20*time.Second, 1<<20
	return backend.Spec{
		JobID: "failclosed", Argv: []string{"/bin/sh", "-c", "echo ran > marker"}, Env: []string{"PATH=/usr/bin:/bin"},
		Workspace: backend.Workspace{Dir: dir}, Cwd: ".", Network: job.NetworkDisabled, Limits: lim,
	}, filepath.Join(dir, "marker")
}

// TestCgroupSetupErrorFailsClosed: when the job's cgroups cannot be
// created, a job that asks for a limit ends backend.unavailable before
// its program runs, unless the operator allowed unenforced limits (then
// it runs and says so); a job that asks for none runs.
func TestCgroupSetupErrorFailsClosed(t *testing.T) {
	if err := newTestBackend(t, backend.Config{}).Available(context.Background()); err != nil {
		t.Skipf("linux_sandbox unavailable here: %v", err)
	}
	limited := backend.Limits{MemoryBytes: 256 << 20, CPUCount: 2, MaxProcesses: 64}
	for _, tc := range []struct {
		name    string
		cfg     backend.Config
		lim     backend.Limits
		wantErr bool
	}{
		{"limits asked", backend.Config{}, limited, true},
		{"only memory asked", backend.Config{}, backend.Limits{MemoryBytes: 64 << 20}, true},
		{"limits asked, operator allows unenforced", backend.Config{AllowUnenforcedLimits: true}, limited, false},
		{"no limit asked", backend.Config{}, backend.Limits{}, false},
		{"no limit asked, RequireLimits", backend.Config{RequireLimits: true}, backend.Limits{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBackend(t, tc.cfg)
			b.cgroups = failingHost(t)
			spec, marker := markerSpec(t, tc.lim)
			out, err := b.Run(context.Background(), spec)
			_, statErr := os.Stat(marker)
			ran := statErr == nil
			if tc.wantErr {
				var je *job.Error
				if !errors.As(err, &je) || je.Code != job.CodeBackendUnavail {
					t.Fatalf("Run() = %+v, %v; want backend.unavailable", out, err)
				}
				if ran {
					t.Error("the program ran although its limits could not be applied")
				}
				if !strings.Contains(je.Message, "allow-unenforced-limits") || je.Details["reason"] == nil {
					t.Errorf("error %q (details %v) does not say why and how to allow it", je.Message, je.Details)
				}
				return
			}
			if err != nil || !ran {
				t.Fatalf("Run() = %+v, %v (ran %v); want a run", out, err, ran)
			}
			for _, l := range []string{job.LimitMemory, job.LimitCPU, job.LimitProcesses} {
				if !slices.Contains(out.NotEnforced, l) || slices.Contains(out.Enforced, l) {
					t.Errorf("%s not reported not_enforced: enforced %v, not enforced %v", l, out.Enforced, out.NotEnforced)
				}
			}
		})
	}
}

func newTestBackend(t *testing.T, cfg backend.Config) *Backend {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLimitsHoldInARunnerWithACPUQuota puts this test process (the
// runner) in a cgroup v1 cpu group with a quota of one CPU, as a systemd
// unit with CPUQuota=100% would, and runs jobs asking for cpu_count 2:
// the job's quota is clamped to the runner's and its memory limit holds
// (a memory bomb is OOM-killed), where the kernel's refusal of the
// larger quota used to leave the job with no cgroup at all.
func TestLimitsHoldInARunnerWithACPUQuota(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a cpu cgroup")
	}
	l, err := selfCgroups().layout()
	if err != nil || (l.mode != cgroupV1 && l.mode != cgroupHybrid) || l.v1["cpu"] == "" {
		t.Skipf("no cgroup v1 cpu hierarchy here (%v %v)", l.mode, err)
	}
	b := newTestBackend(t, backend.Config{})
	if err := b.Available(context.Background()); err != nil {
		t.Skipf("linux_sandbox unavailable here: %v", err)
	}
	own := l.v1["cpu"]
	quota := filepath.Join(own, fmt.Sprintf("agent-runner-test-quota-%d", os.Getpid()))
	if err := os.Mkdir(quota, 0o755); err != nil {
		t.Skipf("cannot make a cpu cgroup: %v", err)
	}
	t.Cleanup(func() { removeCgroupDir(quota) })
	for f, v := range map[string]string{"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "100000"} {
		if err := os.WriteFile(filepath.Join(quota, f), []byte(v), 0o644); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	self := []byte(strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(filepath.Join(quota, "cgroup.procs"), self, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(filepath.Join(own, "cgroup.procs"), self, 0o644); err != nil {
			t.Errorf("move the test back to %s: %v", own, err)
		}
	})
	if got, _ := readCgroupMembership("/proc/self/cgroup"); filepath.Base(got["cpu"]) != filepath.Base(quota) {
		t.Fatalf("the test is in cpu group %q, want %s", got["cpu"], quota)
	}
	// The job's quota as the kernel holds it, read while it runs.
	spec, marker := markerSpec(t, backend.Limits{MemoryBytes: 64 << 20, CPUCount: 2, MaxProcesses: 64})
	spec.Argv = []string{"/bin/sh", "-c", "sleep 1; echo ran > marker"}
	jobQuota := make(chan string, 1)
	go func() {
		dir := filepath.Join(quota, fmt.Sprintf("agent-runner-%s-", spec.JobID))
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			matches, _ := filepath.Glob(dir + "*/cpu.cfs_quota_us")
			if len(matches) == 1 {
				b, _ := os.ReadFile(matches[0])
				jobQuota <- strings.TrimSpace(string(b))
				return
			}
		}
		jobQuota <- "(no job group seen)"
	}()
	out, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run under the runner's quota: %v", err)
	}
	if _, err := os.Stat(marker); err != nil || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("the job did not complete: %+v", out)
	}
	got := map[string]any{"job cpu.cfs_quota_us": <-jobQuota, "enforced": out.Enforced, "not enforced": out.NotEnforced}
	want := map[string]any{"job cpu.cfs_quota_us": "100000",
		"enforced":     []string{job.LimitTimeout, job.LimitOutput, job.LimitFSWrite, job.LimitFSRead, job.LimitSyscalls, job.LimitNetwork, job.LimitLandlock, job.LimitHostIDs, job.LimitMemory, job.LimitCPU, job.LimitProcesses},
		"not enforced": []string(nil)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("job under a runner's 1-CPU quota asking for cpu_count 2 (-want +got):\n%s", diff)
	}

	bomb, _ := markerSpec(t, backend.Limits{MemoryBytes: 64 << 20, CPUCount: 2, MaxProcesses: 64})
	bomb.Argv = []string{"/usr/bin/python3", "-c", "b = []\nwhile True:\n    b.append(bytearray(16 << 20))\n"}
	o, err := b.Run(context.Background(), bomb)
	if err != nil {
		t.Fatalf("memory bomb: %v", err)
	}
	if o.Reason != job.ReasonOOM {
		t.Errorf("memory bomb under memory 64 MB, cpu_count 2 in a 1-CPU runner: reason %q signal %q exit %v, want oom", o.Reason, o.Signal, o.ExitCode)
	}
}
