package backendtest

// The adversarial suite: what a hostile workload tries against an
// isolating backend. Every isolating backend runs it with a Factory that
// returns a fresh, available instance (or skips the test with the reason
// it cannot run here):
//
//	func TestAdversarial(t *testing.T) {
//		backendtest.Adversarial(t, backendtest.New(mybackend.Kind, backend.Config{}))
//	}
//
// The attacks are python3 programs (/usr/bin/python3 must be in the
// backend's view) plus a few host-side checks. Each one is a regression
// test for a class of escape; docs/threat-model.md lists them.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// Adversarial runs every attack as a subtest.
func Adversarial(t *testing.T, newBackend Factory) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"ReadsStayInsideTheView", advReadsStayInsideTheView},
		{"WritesStayInsideTheSnapshot", advWritesStayInsideTheSnapshot},
		{"NoNetworkBeyondLoopback", advNoNetworkBeyondLoopback},
		{"ForkBombIsContained", advForkBombIsContained},
		{"MemoryBombIsOOMKilled", advMemoryBombIsOOMKilled},
		{"TmpIsCapped", advTmpIsCapped},
		{"KernelInterfacesRefused", advKernelInterfacesRefused},
		{"SetuidBinaryGainsNothing", advSetuidBinaryGainsNothing},
		{"ForgedResultIsIgnored", advForgedResultIsIgnored},
		{"SymlinkOutOfTheWorkspace", advSymlinkOutOfTheWorkspace},
		{"BindsUnderTmpStayVisible", advBindsUnderTmpStayVisible},
		{"ForeignABISyscallKillsTheProcess", advForeignABISyscallKillsTheProcess},
		{"SyscallAllowList", advSyscallAllowList},
		{"NoNestedNamespacesOrSharedCounters", advNoNestedNamespacesOrSharedCounters},
		{"ExhaustionInOneSandboxLeavesOthersWorking", advExhaustionInOneSandboxLeavesOthersWorking},
		{"ConcurrentSandboxesGetTheirOwnHostIDs", advConcurrentSandboxesGetTheirOwnHostIDs},
		{"ProcShowsNothingOfTheHost", advProcShowsNothingOfTheHost},
		{"WorkspaceFillIsCapped", advWorkspaceFillIsCapped},
		{"ExecOnlyTheAllowList", advExecOnlyTheAllowList},
		{"DaemonDiesAtDelete", advDaemonDiesAtDelete},
		{"ControlChannelUnreachable", advControlChannelUnreachable},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newBackend) })
	}
}

// Attack runs a python3 program in a sandbox and returns stdout, stderr
// and the outcome.
func Attack(t *testing.T, b backend.Backend, program string, mutate ...func(*backend.Spec)) (string, string, backend.Outcome) {
	t.Helper()
	spec, out, errb := Spec(t, "/usr/bin/python3", "-c", program)
	spec.Limits.Timeout = 20 * time.Second
	for _, m := range mutate {
		m(&spec)
	}
	o, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if o.Release != nil {
		t.Cleanup(o.Release)
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

func advReadsStayInsideTheView(t *testing.T, newBackend Factory) {
	secret := hostSecret(t)
	store := t.TempDir() // stands in for the run store and other jobs' snapshots
	os.WriteFile(filepath.Join(store, "request.json"), []byte("OTHER-JOB"), 0o644)
	other := filepath.Join(store, "runs", "job_other", "snapshot")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "code.py"), []byte("OTHER-SNAPSHOT"), 0o644)
	targets := []string{"/etc/shadow", "/etc/gshadow", secret, filepath.Join(store, "request.json"), filepath.Join(other, "code.py"),
		"/root/.ssh/id_rsa", "/root/.bash_history", "/proc/1/root/etc/shadow", "/proc/1/environ", "/sys/kernel/notes"}
	b := newBackend(t)
	spec, out, _ := Spec(t, append([]string{"/usr/bin/python3", "-c", tryRead, "x"}, targets...)...)
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

func advWritesStayInsideTheSnapshot(t *testing.T, newBackend Factory) {
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
	b := newBackend(t)
	spec, out, errb := Spec(t, "/usr/bin/python3", "-c", program, hostDir)
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

func advNoNetworkBeyondLoopback(t *testing.T, newBackend Factory) {
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
	out, errs, _ := Attack(t, newBackend(t), program)
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
// NeedLimit skips t unless b enforces limit on this host (an
// unprivileged runner without cgroups reports memory, cpu and processes
// as not enforced instead).
func NeedLimit(t *testing.T, b backend.Backend, limit string) {
	t.Helper()
	for _, l := range b.Capabilities().Enforces {
		if l == limit {
			return
		}
	}
	t.Skipf("%s does not enforce %s here (uid %d), so it is reported as not enforced instead", b.Kind(), limit, os.Getuid())
}

func advForkBombIsContained(t *testing.T, newBackend Factory) {
	NeedLimit(t, newBackend(t), job.LimitProcesses)
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
	out, errs, o := Attack(t, newBackend(t), program, func(s *backend.Spec) { s.Limits.MaxProcesses = 32; s.Limits.Timeout = 10 * time.Second })
	if !strings.Contains(out, "fork stopped after") {
		t.Fatalf("fork bomb was not stopped by the pids limit: %s %s %+v", out, errs, o)
	}
	var n int
	fmt.Sscanf(out[strings.Index(out, "after")+6:], "%d", &n)
	if n > 32 {
		t.Errorf("forked %d processes under a limit of 32", n)
	}
}

func advMemoryBombIsOOMKilled(t *testing.T, newBackend Factory) {
	NeedLimit(t, newBackend(t), job.LimitMemory)
	_, _, o := Attack(t, newBackend(t), `
b = []
while True:
    b.append(bytearray(16 << 20))
`, func(s *backend.Spec) { s.Limits.MemoryBytes = 64 << 20 })
	if o.Reason != job.ReasonOOM {
		t.Errorf("memory bomb outcome = reason %q signal %q exit %v, want oom", o.Reason, o.Signal, o.ExitCode)
	}
}

func advTmpIsCapped(t *testing.T, newBackend Factory) {
	out, _, _ := Attack(t, newBackend(t), `
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

func advKernelInterfacesRefused(t *testing.T, newBackend Factory) {
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
	out, errs, _ := Attack(t, newBackend(t), program)
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

func advSetuidBinaryGainsNothing(t *testing.T, newBackend Factory) {
	b := newBackend(t)
	su := "/usr/bin/su"
	if fi, err := os.Stat(su); err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Skip("no setuid su on this host")
	}
	spec, out, errb := Spec(t, su, "root", "-c", "id -u")
	o, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out.String()) == "0" || (o.ExitCode != nil && *o.ExitCode == 0) {
		t.Errorf("setuid su ran a command as root: %q %q", out.String(), errb.String())
	}
}

func advForgedResultIsIgnored(t *testing.T, newBackend Factory) {
	// fd 4 is the init's control socket; a workload must not be able to
	// report its own exit status.
	_, _, o := Attack(t, newBackend(t), `
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

func advSymlinkOutOfTheWorkspace(t *testing.T, newBackend Factory) {
	secret := hostSecret(t)
	out, _, _ := Attack(t, newBackend(t), `
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
func advBindsUnderTmpStayVisible(t *testing.T, newBackend Factory) {
	b := newBackend(t)
	ro, err := os.MkdirTemp("/tmp", "ar-ro-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(ro)
	os.Chmod(ro, 0o755)
	os.WriteFile(filepath.Join(ro, "seen.txt"), []byte("visible"), 0o644)
	spec, out, errb := Spec(t, "/bin/cat", filepath.Join(ro, "seen.txt"))
	spec.ReadOnly = []string{ro}
	o, err := b.Run(context.Background(), spec)
	if err != nil || out.String() != "visible" {
		t.Errorf("read-only bind under /tmp: %q %q %+v %v", out.String(), errb.String(), o, err)
	}
}

// i386Getpid calls getpid through the i386 ABI (int $0x80, eax=20) from
// a 64-bit process: machine code in an executable mapping, called through
// ctypes.
const i386Getpid = `
import ctypes, mmap
code = bytes([0xb8, 0x14, 0, 0, 0, 0xcd, 0x80, 0xc3])  # mov eax,20; int 0x80; ret
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print("I386-GETPID", f(), flush=True)
`

func advForeignABISyscallKillsTheProcess(t *testing.T, newBackend Factory) {
	// The attack works outside the sandbox: the test would be empty if
	// the machine code did not run here.
	if out, err := exec.Command("/usr/bin/python3", "-c", i386Getpid).Output(); err != nil || !strings.Contains(string(out), "I386-GETPID") {
		t.Skipf("this host cannot make i386 syscalls (no IA32 emulation?): %v %s", err, out)
	}
	out, errs, o := Attack(t, newBackend(t), i386Getpid)
	if strings.Contains(out, "I386-GETPID") || o.Signal != "SIGSYS" {
		t.Errorf("i386 syscall in the sandbox: out %q err %q outcome %+v; want the process killed by SIGSYS", out, errs, o)
	}
	// x32: the native table's numbers with bit 30 set.
	out, errs, o = Attack(t, newBackend(t), `
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("X32", libc.syscall(0x40000000 | 39), flush=True)
`)
	if strings.Contains(out, "X32") || o.Signal != "SIGSYS" {
		t.Errorf("x32 syscall in the sandbox: out %q err %q outcome %+v; want SIGSYS", out, errs, o)
	}
}

// syscallProbe makes raw syscalls and prints "name errno-name" for each.
const syscallProbe = `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    e = ctypes.get_errno()
    print(name, "OK" if r >= 0 else errno.errorcode.get(e, str(e)), flush=True)
    return r
call("open_tree_attr", 467, -100, 0, 0, 0, 0)      # refused with the mount group
call("nr470", 470)                                  # not in any kernel yet
call("nr1000", 1000)                                # not a syscall yet
call("clone3", 435, 0, 0)
call("io_uring_setup", 425, 1, 0)
call("keyctl", 250, 0, 0)                           # KEYCTL_GET_KEYRING_ID
call("add_key", 248, 0, 0, 0, 0, 0)
call("perf_event_open", 298, 0, 0, -1, -1, 0)
call("userfaultfd", 323, 0)
call("bpf", 321, 0, 0, 0)
call("socket_packet", 41, 17, 3, 0)                 # AF_PACKET, SOCK_RAW
call("socket_vsock", 41, 40, 1, 0)                  # AF_VSOCK
r = call("socket_inet", 41, 2, 1, 0)                # AF_INET, SOCK_STREAM
call("clone_newuser_newnet", 56, 0x10000000 | 0x40000000 | 17, 0, 0, 0, 0)
call("clone_newns", 56, 0x00020000 | 17, 0, 0, 0, 0)
call("unshare_newuser", 272, 0x10000000)
call("unshare_newnet", 272, 0x40000000)
call("unshare_newtime", 272, 0x80)
call("unshare_files", 272, 0x400)                   # CLONE_FILES: no namespace
call("personality_query", 135, 0xffffffff)
call("personality_readimpliesexec", 135, 0x0400000)
call("setns", 308, 0, 0)
call("open_tree", 428, -100, 0, 0)
`

func advSyscallAllowList(t *testing.T, newBackend Factory) {
	out, errs, _ := Attack(t, newBackend(t), syscallProbe)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			got[f[0]] = f[1]
		}
	}
	want := map[string]string{
		"open_tree_attr": "EPERM", "nr470": "ENOSYS", "nr1000": "ENOSYS", "clone3": "ENOSYS",
		"io_uring_setup": "EPERM", "keyctl": "EPERM", "add_key": "EPERM", "perf_event_open": "EPERM",
		"userfaultfd": "EPERM", "bpf": "EPERM", "setns": "EPERM", "open_tree": "EPERM",
		"socket_packet": "EAFNOSUPPORT", "socket_vsock": "EAFNOSUPPORT", "socket_inet": "OK",
		"clone_newuser_newnet": "EPERM", "clone_newns": "EPERM",
		"unshare_newuser": "EPERM", "unshare_newnet": "EPERM", "unshare_newtime": "EPERM", "unshare_files": "OK",
		"personality_query": "OK", "personality_readimpliesexec": "EPERM",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s in the sandbox = %q, want %s", name, got[name], w)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", out, errs)
	}
}

func advNoNestedNamespacesOrSharedCounters(t *testing.T, newBackend Factory) {
	out, errs, _ := Attack(t, newBackend(t), `
import glob
for p in sorted(glob.glob("/proc/sys/user/max_*")):
    print(p.rsplit("/", 1)[1], open(p).read().strip())
`)
	for _, ns := range []string{"user", "mnt", "net", "pid", "ipc", "uts", "cgroup", "time"} {
		if !strings.Contains(out, "max_"+ns+"_namespaces 0\n") {
			t.Errorf("max_%s_namespaces is not 0 in the sandbox:\n%s%s", ns, out, errs)
		}
	}
}

// inotifyHog takes every inotify instance the kernel gives it, reports
// the count, then holds them until stdin closes.
const inotifyHog = `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
print("HELD", len(fds), flush=True)
sys.stdin.read()
`

func advExhaustionInOneSandboxLeavesOthersWorking(t *testing.T, newBackend Factory) {
	NeedLimit(t, newBackend(t), job.LimitHostIDs)
	b := newBackend(t)
	// The hog holds its inotify instances (and tries nested namespaces)
	// while a second sandbox starts and uses inotify itself.
	hogSpec, hogOut, _ := Spec(t, "/usr/bin/python3", "-c", inotifyHog)
	hogSpec.Limits.Timeout = 60 * time.Second
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	hogSpec.Stdin = stdinR
	var wg sync.WaitGroup
	wg.Go(func() { b.Run(context.Background(), hogSpec) })
	defer func() { stdinW.Close(); wg.Wait(); stdinR.Close() }()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(hogOut.String(), "HELD"); {
		if time.Now().After(deadline) {
			t.Fatalf("the hog never reported: %q", hogOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, errs, o := Attack(t, newBackend(t), `
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while n < 16 and libc.inotify_init1(0) >= 0:
    n += 1
print("GOT", n)
`)
	if !strings.Contains(out, "GOT 16") {
		t.Errorf("a sandbox beside one that exhausted inotify (%s) got: %q %q %+v", strings.TrimSpace(hogOut.String()), out, errs, o)
	}
}

func advConcurrentSandboxesGetTheirOwnHostIDs(t *testing.T, newBackend Factory) {
	NeedLimit(t, newBackend(t), job.LimitHostIDs)
	b := newBackend(t)
	// Each reports its uid as the host sees it, through the uid_map.
	const n = 4
	outs := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		spec, out, _ := Spec(t, "/bin/sh", "-c", "cat /proc/self/uid_map; sleep 1")
		wg.Go(func() {
			<-start
			if _, err := b.Run(context.Background(), spec); err != nil {
				t.Error(err)
			}
			outs[i] = strings.Join(strings.Fields(out.String()), " ")
		})
	}
	close(start)
	wg.Wait()
	seen := map[string]bool{}
	for _, m := range outs {
		if seen[m] || m == "" {
			t.Errorf("two concurrent sandboxes share the host id range %q (all: %q)", m, outs)
		}
		seen[m] = true
		if strings.HasPrefix(m, "0 0 ") {
			t.Errorf("a sandbox maps to host root: %q", m)
		}
	}
}

// advProcShowsNothingOfTheHost reads the host-identifying files of /proc
// inside the sandbox: the kernel command line and the boot id must not be
// the host's (a backend masks them, or has a kernel of its own).
func advProcShowsNothingOfTheHost(t *testing.T, newBackend Factory) {
	out, errs, o := Attack(t, newBackend(t), `
for f in ["/proc/cmdline", "/proc/sys/kernel/random/boot_id"]:
    try:
        print(f, repr(open(f).read()))
    except OSError as e:
        print(f, "unreadable", e.strerror)
`)
	if o.Reason != job.ReasonExit {
		t.Fatalf("outcome %+v stderr %q", o, errs)
	}
	for _, f := range []string{"/proc/cmdline", "/proc/sys/kernel/random/boot_id"} {
		host, err := os.ReadFile(f)
		if err != nil {
			t.Skipf("the host's %s is unreadable: %v", f, err)
		}
		if h := strings.TrimSpace(string(host)); h != "" && strings.Contains(out, h) {
			t.Errorf("the sandbox read the host's %s: %s", f, out)
		}
	}
}

// advWorkspaceFillIsCapped: a job wrote 1 GiB and 20,000 files into
// /workspace with no quota; under limits.disk_mb the write stops at the
// cap with ENOSPC, and so do file creations under disk_inodes.
func advWorkspaceFillIsCapped(t *testing.T, newBackend Factory) {
	NeedLimit(t, newBackend(t), job.LimitDisk)
	out, errs, o := Attack(t, newBackend(t), `
import os
n = 0
try:
    with open("fill", "wb") as f:
        for _ in range(256):
            f.write(b"x" * (1 << 20))
            n += 1
    print("FILLED", n, "MB")
except OSError as e:
    print("bytes stopped after", n, "MB:", e.strerror)
os.remove("fill")
k = 0
try:
    os.mkdir("many")
    while k < 20000:
        open("many/%d" % k, "w").close()
        k += 1
    print("CREATED", k)
except OSError as e:
    print("files stopped after", k, ":", e.strerror)
`, func(s *backend.Spec) { s.Limits.DiskBytes = 32 << 20; s.Limits.DiskInodes = 1000 })
	if !strings.Contains(out, "bytes stopped after") || !strings.Contains(out, "files stopped after") || !strings.Contains(out, "No space left") {
		t.Fatalf("workspace fill under disk_mb 32 / disk_inodes 1000 was not stopped: %s %s %+v", out, errs, o)
	}
	var mb int
	fmt.Sscanf(out[strings.Index(out, "bytes stopped after")+len("bytes stopped after "):], "%d", &mb)
	if mb > 32 {
		t.Errorf("wrote %d MB under a 32 MB cap", mb)
	}
}
