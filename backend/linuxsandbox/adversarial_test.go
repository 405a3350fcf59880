package linuxsandbox_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/job"
)

// attack runs a python3 program in a sandbox and returns stdout, stderr
// and the outcome.
func attack(t *testing.T, program string, mutate ...func(*backend.Spec)) (string, string, backend.Outcome) {
	t.Helper()
	b := sandbox(t)
	spec, out, errb := backendtest.Spec(t, "/usr/bin/python3", "-c", program)
	spec.Limits.Timeout = 20 * time.Second
	for _, m := range mutate {
		m(&spec)
	}
	o, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out.String(), errb.String(), o
}

// hostSecret creates a secret file outside every sandbox view.
func hostSecret(t *testing.T) string {
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	p := filepath.Join(dir, "id_rsa")
	if err := os.WriteFile(p, []byte("HOST-SECRET-KEY"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const tryRead = `
import sys
for p in sys.argv[1:]:
    try:
        data = open(p, "rb").read()
        print("READ", p, data[:64])
    except Exception as e:
        print("DENIED", p, type(e).__name__)
`

func TestReadsStayInsideTheView(t *testing.T) {
	secret := hostSecret(t)
	store := t.TempDir() // stands in for the run store and other jobs' snapshots
	os.WriteFile(filepath.Join(store, "request.json"), []byte("OTHER-JOB"), 0o644)
	other := filepath.Join(store, "runs", "job_other", "snapshot")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "code.py"), []byte("OTHER-SNAPSHOT"), 0o644)
	targets := []string{"/etc/shadow", "/etc/gshadow", secret, filepath.Join(store, "request.json"), filepath.Join(other, "code.py"),
		"/root/.ssh/id_rsa", "/root/.bash_history", "/proc/1/root/etc/shadow", "/proc/1/environ", "/sys/kernel/notes"}
	b := sandbox(t)
	spec, out, _ := backendtest.Spec(t, append([]string{"/usr/bin/python3", "-c", tryRead, "x"}, targets...)...)
	spec.Argv = append([]string{"/usr/bin/python3", "-c", tryRead}, targets...)
	if _, err := b.Run(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasPrefix(line, "READ") && !strings.HasSuffix(line, "b''") {
			t.Errorf("sandbox read host data: %s", line)
		}
	}
	if !strings.Contains(out.String(), "DENIED "+secret) {
		t.Errorf("expected the host secret to be unreachable:\n%s", out.String())
	}
}

func TestWritesStayInsideTheSnapshot(t *testing.T) {
	hostDir := t.TempDir()
	os.Chmod(filepath.Dir(hostDir), 0o755)
	os.Chmod(hostDir, 0o777)
	program := `
import os, sys
for p in ["/usr/pwned", "/etc/pwned", "/pwned", "/proc/sys/kernel/hostname", "/sys/pwned", sys.argv[1] + "/pwned", "/workspace/../pwned"]:
    try:
        open(p, "w").write("x")
        print("WROTE", p)
    except Exception as e:
        print("DENIED", p, type(e).__name__)
open("/workspace/ok.txt", "w").write("fine")
open("/tmp/ok.txt", "w").write("fine")
print("inside writes ok")
`
	b := sandbox(t)
	spec, out, errb := backendtest.Spec(t, "/usr/bin/python3", "-c", program, hostDir)
	if _, err := b.Run(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "WROTE") || !strings.Contains(out.String(), "inside writes ok") {
		t.Errorf("writes:\n%s%s", out.String(), errb.String())
	}
	if _, err := os.Stat(filepath.Join(hostDir, "pwned")); err == nil {
		t.Error("the sandbox wrote into a host directory")
	}
	if b, _ := os.ReadFile(filepath.Join(spec.Workspace.Dir, "ok.txt")); string(b) != "fine" {
		t.Error("a write inside /workspace did not land in the snapshot")
	}
}

func TestNoNetworkBeyondLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	program := fmt.Sprintf(`
import socket
def attempt(name, fn):
    try:
        fn()
        print("REACHED", name)
    except Exception as e:
        print("BLOCKED", name, type(e).__name__)
attempt("host-loopback", lambda: socket.create_connection(("127.0.0.1", %d), timeout=2))
attempt("dns", lambda: socket.getaddrinfo("example.com", 443))
attempt("public-ip", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname(), timeout=2)
print("sandbox loopback works")
`, port)
	out, errs, _ := attack(t, program)
	if strings.Contains(out, "REACHED") || !strings.Contains(out, "sandbox loopback works") {
		t.Errorf("network:\n%s%s", out, errs)
	}
	select {
	case <-accepted:
		t.Error("the host listener accepted a connection from the sandbox")
	default:
	}
}

// needCgroups skips a test of a cgroup limit where the runner cannot
// create cgroups (unprivileged without delegation).
func needCgroups(t *testing.T, limit string) {
	t.Helper()
	for _, l := range sandbox(t).Capabilities().Enforces {
		if l == limit {
			return
		}
	}
	t.Skipf("this runner cannot create cgroups (uid %d), so %s is reported as not enforced instead", os.Getuid(), limit)
}

func TestForkBombIsContained(t *testing.T) {
	needCgroups(t, job.LimitProcesses)
	program := `
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print("fork stopped after", n, type(e).__name__)
`
	out, errs, o := attack(t, program, func(s *backend.Spec) { s.Limits.MaxProcesses = 32; s.Limits.Timeout = 10 * time.Second })
	if !strings.Contains(out, "fork stopped after") {
		t.Fatalf("fork bomb was not stopped by the pids limit: %s %s %+v", out, errs, o)
	}
	var n int
	fmt.Sscanf(out[strings.Index(out, "after")+6:], "%d", &n)
	if n > 32 {
		t.Errorf("forked %d processes under a limit of 32", n)
	}
}

func TestMemoryBombIsOOMKilled(t *testing.T) {
	needCgroups(t, job.LimitMemory)
	_, _, o := attack(t, `
b = []
while True:
    b.append(bytearray(16 << 20))
`, func(s *backend.Spec) { s.Limits.MemoryBytes = 64 << 20 })
	if o.Reason != job.ReasonOOM {
		t.Errorf("memory bomb outcome = reason %q signal %q exit %v, want oom", o.Reason, o.Signal, o.ExitCode)
	}
}

func TestTmpIsCapped(t *testing.T) {
	out, _, _ := attack(t, `
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(64):
            f.write(b"x" * (1 << 20))
    print("FILLED 64 MB")
except OSError as e:
    print("stopped", e.strerror)
`, func(s *backend.Spec) { s.Limits.TmpBytes = 4 << 20 })
	if !strings.Contains(out, "No space left") {
		t.Errorf("/tmp fill: %s", out)
	}
}

func TestKernelInterfacesRefused(t *testing.T) {
	program := `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    r = getattr(libc, name)(*args)
    print(name, "ok" if r == 0 else "refused", os.strerror(ctypes.get_errno()) if r != 0 else "")
call("ptrace", 16, 1, 0, 0)                       # PTRACE_ATTACH to pid 1
call("mount", b"none", b"/tmp", b"tmpfs", 0, None)
call("unshare", 0x10000000)                         # CLONE_NEWUSER
call("unshare", 0x00020000)                         # CLONE_NEWNS
call("setns", 0, 0)
call("umount2", b"/workspace", 2)
call("chroot", b"/tmp")
st = open("/proc/self/status").read()
print([l for l in st.splitlines() if l.startswith(("NoNewPrivs", "CapEff", "CapBnd", "Uid", "Seccomp:"))])
print("fds", sorted(os.listdir("/proc/self/fd")))
`
	out, errs, _ := attack(t, program)
	for _, call := range []string{"ptrace", "mount", "unshare", "setns", "umount2", "chroot"} {
		if strings.Contains(out, call+" ok") {
			t.Errorf("%s succeeded in the sandbox", call)
		}
	}
	for _, want := range []string{"NoNewPrivs:\\t1", "CapEff:\\t0000000000000000", "CapBnd:\\t0000000000000000", "Seccomp:\\t2"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %s:\n%s%s", want, out, errs)
		}
	}
	if !strings.Contains(out, "fds ['0', '1', '2', '3']") {
		t.Errorf("the workload inherited extra descriptors (the init's pipes?): %s", out)
	}
}

func TestSetuidBinaryGainsNothing(t *testing.T) {
	b := sandbox(t)
	su := "/usr/bin/su"
	if fi, err := os.Stat(su); err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Skip("no setuid su on this host")
	}
	spec, out, errb := backendtest.Spec(t, su, "root", "-c", "id -u")
	o, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out.String()) == "0" || (o.ExitCode != nil && *o.ExitCode == 0) {
		t.Errorf("setuid su ran a command as root: %q %q", out.String(), errb.String())
	}
}

func TestForgedResultIsIgnored(t *testing.T) {
	// fd 4 is the init's result pipe; a workload must not be able to
	// report its own exit status.
	_, _, o := attack(t, `
import os, sys
try:
    os.write(4, b'{"exit_code": 0}\n')
except OSError:
    pass
sys.exit(3)
`)
	if o.ExitCode == nil || *o.ExitCode != 3 {
		t.Errorf("outcome exit = %v, want the real exit 3", o.ExitCode)
	}
}

func TestSymlinkOutOfTheWorkspace(t *testing.T) {
	secret := hostSecret(t)
	out, _, _ := attack(t, `
import os, sys
os.symlink(sys.argv[1], "/workspace/link")
try:
    print("READ", open("/workspace/link").read())
except Exception as e:
    print("DENIED", type(e).__name__)
try:
    os.link("/etc/passwd", "/workspace/hard")
    print("HARDLINKED")
except Exception as e:
    print("NOLINK", type(e).__name__)
`, func(s *backend.Spec) { s.Argv = append(s.Argv, secret) })
	if strings.Contains(out, "HOST-SECRET") || strings.Contains(out, "HARDLINKED") {
		t.Errorf("link escape: %s", out)
	}
}

// Regression: a read-only or writable bind under /tmp was hidden by the
// sandbox's /tmp tmpfs (found running gateway roots from /tmp).
func TestBindsUnderTmpStayVisible(t *testing.T) {
	b := sandbox(t)
	ro, err := os.MkdirTemp("/tmp", "ar-ro-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(ro)
	os.Chmod(ro, 0o755)
	os.WriteFile(filepath.Join(ro, "seen.txt"), []byte("visible"), 0o644)
	spec, out, errb := backendtest.Spec(t, "/bin/cat", filepath.Join(ro, "seen.txt"))
	spec.ReadOnly = []string{ro}
	o, err := b.Run(context.Background(), spec)
	if err != nil || out.String() != "visible" {
		t.Errorf("read-only bind under /tmp: %q %q %+v %v", out.String(), errb.String(), o, err)
	}
}
