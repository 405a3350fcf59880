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

// guestTests are what TestCgroupV2InGuest runs in the guest: the cgroup
// code on a real unified hierarchy, the conformance suite, the limit
// attacks and the usage tests. TCG is slow, so nothing more.
const guestTests = `^TestCgroupOnThisKernel$|^TestConformance$|^TestAdversarial$/^(ForkBombIsContained|MemoryBombIsOOMKilled)$|^TestUsageIsSampledWhileRunning$|^TestCPUQuotaHoldsABusyJob$`

// inGuestEnv is set for the test binary inside the guest.
const inGuestEnv = "AGENT_RUNNER_IN_GUEST"

// TestCgroupV2InGuest boots a Debian kernel under QEMU (TCG) with only
// cgroup2 mounted and runs guestTests there, as root in a cgroup of its
// own (what a systemd unit with Delegate=yes gets), with the host's
// toolchain shared read-only over 9p. This host and CI mount cgroup v1,
// so this is where the v2 code meets a kernel.
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
	image := guestvm.Image{
		Init:    filepath.Join(dir, "init"),
		Kernel:  kernel,
		Modules: guestvm.ShareModules,
		Files:   map[string]string{"/test/linuxsandbox.test": filepath.Join(dir, "linuxsandbox.test")},
		Config: guestvm.Config{
			Shares: []guestvm.Mount{{Tag: "hostroot", Path: "/host", ReadOnly: true}},
			Binds:  binds,
			Cgroup: "agent-runner.service",
			Argv:   []string{"/test/linuxsandbox.test", "-test.run", guestTests, "-test.v", "-test.count=1", "-test.timeout=9m"},
			Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/root", "TMPDIR=/tmp", inGuestEnv + "=1"},
			Dir:    "/tmp",
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
	out := string(res.Output)
	var results []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--- ") {
			results = append(results, strings.TrimRight(line, "\r"))
		}
	}
	t.Logf("in the guest:\n%s", strings.Join(results, "\n"))
	if res.ExitCode != 0 {
		t.Fatalf("the guest suite exited %d:\n%s", res.ExitCode, out)
	}
	for _, want := range []string{
		"cgroup mode v2",
		"--- PASS: TestCgroupOnThisKernel",
		"--- PASS: TestConformance",
		"--- PASS: TestAdversarial/ForkBombIsContained",
		"--- PASS: TestAdversarial/MemoryBombIsOOMKilled",
		"--- PASS: TestUsageIsSampledWhileRunning",
		"--- PASS: TestCPUQuotaHoldsABusyJob",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the guest's output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("guest console:\n%s", out)
	}
}
