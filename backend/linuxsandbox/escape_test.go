package linuxsandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-runner/agent-runner/backend/backendtest"
)

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

func TestForeignABISyscallKillsTheProcess(t *testing.T) {
	// The attack works outside the sandbox: the test would be empty if
	// the machine code did not run here.
	if out, err := exec.Command("/usr/bin/python3", "-c", i386Getpid).Output(); err != nil || !strings.Contains(string(out), "I386-GETPID") {
		t.Skipf("this host cannot make i386 syscalls (no IA32 emulation?): %v %s", err, out)
	}
	out, errs, o := attack(t, i386Getpid)
	if strings.Contains(out, "I386-GETPID") || o.Signal != "SIGSYS" {
		t.Errorf("i386 syscall in the sandbox: out %q err %q outcome %+v; want the process killed by SIGSYS", out, errs, o)
	}
	// x32: the native table's numbers with bit 30 set.
	out, errs, o = attack(t, `
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

func TestSyscallAllowList(t *testing.T) {
	out, errs, _ := attack(t, syscallProbe)
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

func TestNoNestedNamespacesOrSharedCounters(t *testing.T) {
	out, errs, _ := attack(t, `
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

func TestExhaustionInOneSandboxLeavesOthersWorking(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("per-sandbox id ranges need a root runner")
	}
	b := sandbox(t)
	// The hog holds its inotify instances (and tries nested namespaces)
	// while a second sandbox starts and uses inotify itself.
	hogSpec, hogOut, _ := backendtest.Spec(t, "/usr/bin/python3", "-c", inotifyHog)
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
	out, errs, o := attack(t, `
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

func TestConcurrentSandboxesGetTheirOwnHostIDs(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("per-sandbox id ranges need a root runner")
	}
	b := sandbox(t)
	// Each reports its uid as the host sees it, through the uid_map.
	const n = 4
	outs := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		spec, out, _ := backendtest.Spec(t, "/bin/sh", "-c", "cat /proc/self/uid_map; sleep 1")
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

// TestNoControllingTerminal runs a sandbox from a child of the test
// whose controlling terminal is a pty, as `agent-runner run` typed in a
// terminal is, and checks that nothing the workload writes to /dev/tty
// reaches that terminal.
func TestNoControllingTerminal(t *testing.T) {
	if os.Getenv("AR_TTY_CHILD") == "1" {
		out, errs, _ := attack(t, ttyWriter)
		fmt.Printf("CHILD-DONE %q %q\n", out, errs)
		return
	}
	sandbox(t)
	master, slave := openPTY(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoControllingTerminal$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AR_TTY_CHILD=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var seen bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&seen, master); close(copied) }()
	cmd.Wait()
	master.Close()
	<-copied
	if !strings.Contains(seen.String(), "CHILD-DONE") {
		t.Fatalf("the child did not run the sandbox: %q", seen.String())
	}
	if strings.Contains(seen.String(), "INJECTED") || !strings.Contains(seen.String(), "NOTTY 6") {
		t.Errorf("the workload reached the operator's terminal (want ENXIO on /dev/tty):\n%s", seen.String())
	}
}

const ttyWriter = `
import os
try:
    fd = os.open("/dev/tty", os.O_RDWR)
    os.write(fd, b"INJECTED\\n")
    print("OPENED")
except OSError as e:
    print("NOTTY", e.errno)
`

func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}
