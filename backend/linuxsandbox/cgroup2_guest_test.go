package linuxsandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/internal/guestvm"
)

// guestRuns are the test binary's runs in the guest, each in a layout a
// cgroup v2 host gives the runner. TCG is slow: only the cgroup code on a
// real unified hierarchy, the conformance suite, the limit attacks and
// the usage tests, and fewer beyond the first layout.
var guestRuns = []struct {
	name   string
	cgroup string // below /sys/fs/cgroup
	user   int
	tests  string
	pass   []string // each must PASS (not SKIP) in this run
}{
	{"root in a unit with Delegate=yes", "system.slice/agent-runner.service", 0,
		`^TestCgroupOnThisKernel$|^TestConformance$|^TestAdversarial$/^(ForkBombIsContained|MemoryBombIsOOMKilled)$|^TestUsageIsSampledWhileRunning$|^TestCPUQuotaHoldsABusyJob$`,
		[]string{"TestCgroupOnThisKernel", "TestConformance", "TestAdversarial/ForkBombIsContained", "TestAdversarial/MemoryBombIsOOMKilled", "TestUsageIsSampledWhileRunning", "TestCPUQuotaHoldsABusyJob"}},
	{"root in the root cgroup", "", 0,
		`^TestCgroupOnThisKernel$|^TestAdversarial$/^(ForkBombIsContained|MemoryBombIsOOMKilled)$`,
		[]string{"TestCgroupOnThisKernel", "TestAdversarial/ForkBombIsContained", "TestAdversarial/MemoryBombIsOOMKilled"}},
	{"unprivileged in a delegated subtree", "user.slice/user-65534.slice/agent-runner.service", 65534,
		`^TestCgroupOnThisKernel$|^TestAdversarial$/^(ForkBombIsContained|MemoryBombIsOOMKilled)$|^TestCPUQuotaHoldsABusyJob$`,
		[]string{"TestCgroupOnThisKernel", "TestAdversarial/ForkBombIsContained", "TestAdversarial/MemoryBombIsOOMKilled", "TestCPUQuotaHoldsABusyJob"}},
}

// inGuestEnv is set for the test binary inside the guest.
const inGuestEnv = "AGENT_RUNNER_IN_GUEST"

// TestCgroupV2InGuest boots a Debian kernel under QEMU (TCG) with only
// cgroup2 mounted and runs guestRuns there, with the host's toolchain
// shared read-only over 9p. This host and CI mount cgroup v1, so this is
// where the v2 code meets a kernel.
func TestCgroupV2InGuest(t *testing.T) {
	if os.Getenv(inGuestEnv) != "" {
		t.Skip("already in the guest")
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 is not installed (Debian: qemu-system-x86; scripts/test installs it)")
	}
	kernel, err := guestvm.FindKernel("/boot", "/lib/modules")
	if err != nil {
		t.Skipf("no guest kernel: %v", err)
	}
	if os.Getuid() != 0 {
		t.Skip("not root: the 9p share of / would hide what root alone may read")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go test puts GOROOT/bin on PATH, but: %v", err)
	}
	dir := t.TempDir()
	build := func(args ...string) {
		t.Helper()
		cmd := exec.Command(gobin, args...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	started := time.Now()
	build("build", "-o", filepath.Join(dir, "init"), "github.com/agent-runner/agent-runner/internal/guestvm/guestinit")
	build("test", "-c", "-o", filepath.Join(dir, "linuxsandbox.test"), ".")
	built := time.Since(started)

	var binds []guestvm.Bind
	for _, p := range DefaultToolchain {
		binds = append(binds, guestvm.Bind{From: "/host" + p, To: p})
	}
	var commands []guestvm.Command
	for _, r := range guestRuns {
		commands = append(commands, guestvm.Command{
			Name:   r.name,
			Argv:   []string{"/test/linuxsandbox.test", "-test.run", r.tests, "-test.v", "-test.count=1", "-test.timeout=5m"},
			Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/tmp", "TMPDIR=/tmp", inGuestEnv + "=1"},
			Dir:    "/tmp",
			Cgroup: r.cgroup,
			User:   r.user,
		})
	}
	image := guestvm.Image{
		Init:    filepath.Join(dir, "init"),
		Kernel:  kernel,
		Modules: guestvm.ShareModules,
		Files:   map[string]string{"/test/linuxsandbox.test": filepath.Join(dir, "linuxsandbox.test")},
		Config: guestvm.Config{
			Shares:   []guestvm.Mount{{Tag: "hostroot", Path: "/host", ReadOnly: true}},
			Binds:    binds,
			Commands: commands,
		},
	}
	initrd := filepath.Join(dir, "initrd.cpio")
	if err := image.WriteInitramfs(initrd); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := guestvm.Machine{
		QEMU: qemu, Kernel: kernel.Image, Initrd: initrd, MemoryMB: 1024, CPUs: 2,
		Shares: []guestvm.Share{{Tag: "hostroot", HostDir: "/", ReadOnly: true}},
	}.Run(ctx)
	t.Logf("kernel %s; building %v, the guest %v", kernel.Release, built.Round(time.Second), res.Elapsed.Round(time.Second))
	if err != nil {
		t.Fatalf("%v\nguest console:\n%s", err, res.Output)
	}
	if len(res.Runs) != len(guestRuns) {
		t.Fatalf("the guest reported %d runs, want %d:\n%s", len(res.Runs), len(guestRuns), res.Output)
	}
	for i, r := range guestRuns {
		got := res.Runs[i]
		var results []string
		for _, line := range strings.Split(got.Output, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--- ") {
				results = append(results, line)
			}
		}
		t.Logf("%s (exit %d):\n%s", got.Name, got.ExitCode, strings.Join(results, "\n"))
		ok := got.Name == r.name && got.ExitCode == 0 && strings.Contains(got.Output, "cgroup mode v2")
		for _, test := range r.pass {
			ok = ok && strings.Contains(got.Output, "--- PASS: "+test+" ")
		}
		if !ok {
			t.Errorf("%s: exit %d, want 0 on cgroup v2 with %s passing; its console:\n%s", r.name, got.ExitCode, strings.Join(r.pass, ", "), got.Output)
		}
	}
}
