package linuxsandbox_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnprivileged re-runs the conformance, isolation and lifecycle tests of this
// package as an unprivileged user (nobody), the mode without a uid range
// or cgroup delegation. It runs where the test runs as root (CI).
func TestUnprivileged(t *testing.T) {
	out := runUnprivileged(t, "^(TestConformance|TestAdversarial|TestLifecycle)$")
	if !strings.Contains(out, "--- PASS: TestConformance") || !strings.Contains(out, "--- PASS: TestAdversarial/ReadsStayInsideTheView") {
		t.Fatalf("unprivileged run did not pass the suite:\n%s", out)
	}
	t.Logf("unprivileged run:\n%s", out)
	if !strings.Contains(out, "--- SKIP: TestAdversarial/ForkBombIsContained") {
		t.Logf("cgroup limits were available to nobody here")
	}
}

func copyFile(t *testing.T, from, to string) {
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
}

// runUnprivileged re-runs this test binary's tests matching pattern as
// nobody (an unprivileged runner: no uid range, no cgroup delegation) and
// returns their verbose output. It skips where the test does not run as
// root (that run is the unprivileged mode already) or in that child.
func runUnprivileged(t *testing.T, pattern string) string {
	t.Helper()
	if os.Getenv("AGENT_RUNNER_UNPRIVILEGED_CHILD") != "" {
		t.Skip("already the unprivileged child")
	}
	if os.Getuid() != 0 {
		t.Skip("not root: this run is the unprivileged mode already")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	sandbox(t)
	// The test binary must be reachable by nobody.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		os.Chmod(d, 0o755)
	}
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o777)
	os.Chmod(tmp, 0o1777)
	bin := filepath.Join(dir, "sandbox.test")
	copyFile(t, os.Args[0], bin)
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run", pattern, "-test.v", "-test.count=1")
	cmd.Env = []string{"HOME=" + tmp, "TMPDIR=" + tmp, "PATH=/usr/bin:/bin", "AGENT_RUNNER_UNPRIVILEGED_CHILD=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unprivileged run failed: %v\n%s", err, out)
	}
	return string(out)
}
