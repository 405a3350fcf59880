package oci_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/backend/oci"
	"github.com/agent-runner/agent-runner/job"
)

// The tests run an image built in the test: a root of hard links to the
// host's /usr/bin, /usr/sbin, /usr/lib64, /usr/lib/x86_64-linux-gnu and
// /usr/lib/python3* (the programs the suites run), the usr-merge links
// and a small /etc. Hard links cost nothing and stay read-only: the
// backend only ever reads an image's root.

var (
	imageOnce sync.Once
	imageDir  string
	imageErr  error
)

func testImage(t testing.TB) *backend.Image {
	t.Helper()
	imageOnce.Do(func() { imageDir, imageErr = buildImage() })
	if imageErr != nil {
		t.Skipf("cannot build the test image here: %v", imageErr)
	}
	return &backend.Image{Ref: "test:latest", Digest: "sha256:test", RootFS: imageDir, Env: []string{"PATH=/usr/bin:/bin"}}
}

func buildImage() (string, error) {
	dir, err := os.MkdirTemp("", "oci-image-")
	if err != nil {
		return "", err
	}
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"usr/lib", "etc", "root", "tmp", "proc", "sys", "dev", "workspace", "var/tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	for _, d := range []string{dir, root} {
		if err := os.Chmod(d, 0o755); err != nil {
			return "", err
		}
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} {
		if err := os.Symlink("usr/"+l, filepath.Join(root, l)); err != nil {
			return "", err
		}
	}
	pys, _ := filepath.Glob("/usr/lib/python3*")
	cps := [][]string{
		{"/usr/bin", "/usr/sbin", "/usr/lib64", filepath.Join(root, "usr")},
		append(append([]string{"/usr/lib/x86_64-linux-gnu"}, pys...), filepath.Join(root, "usr/lib")),
	}
	for _, args := range cps {
		if out, err := exec.Command("cp", append([]string{"-al"}, args...)...).CombinedOutput(); err != nil {
			return "", &exec.Error{Name: "cp -al " + strings.Join(args, " "), Err: errString(out)}
		}
	}
	files := map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"etc/group":    "root:x:0:\ntty:x:5:\nnogroup:x:65534:\n",
		"etc/hostname": "sandbox\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return root, nil
}

type errString []byte

func (e errString) Error() string { return string(bytes.TrimSpace(e)) }

// imaged is the oci backend with every Spec run on the test image with
// one runtime: the suites build their Specs without either.
type imaged struct {
	*oci.Backend
	rt  string
	img *backend.Image
}

var _ backend.Sandboxes = imaged{}

func (i imaged) with(spec backend.Spec) backend.Spec {
	spec.Image, spec.Runtime = i.img, i.rt
	return spec
}

func (i imaged) Run(ctx context.Context, spec backend.Spec) (backend.Outcome, error) {
	return i.Backend.Run(ctx, i.with(spec))
}

func (i imaged) Create(ctx context.Context, spec backend.Spec) (backend.Sandbox, error) {
	return i.Backend.Create(ctx, i.with(spec))
}

// differs are the suites' tests whose expectation this backend does not
// meet, by runtime, with the reason: by design (root inside an image is
// the point) or a known gap, said in docs/images.md. Each is skipped
// with its reason printed.
var differs = map[string]map[string]string{
	"": {
		"WritesStayInsideTheSnapshot": "by design: root inside writes /etc, /usr and / of its own overlay (TestRootInside checks that none of it reaches the image, the host or another sandbox)",
		"KernelInterfacesRefused":     "by design: root inside holds Docker's default capabilities less NET_RAW, MKNOD, AUDIT_WRITE, in its own user namespace (the namespace-creating and mount syscalls are still refused)",
		"BindsUnderTmpStayVisible":    "the oci backend takes no binds (refused with backend.unavailable)",
	},
	RuntimeRunc: {
		"SyscallAllowList":                          "known difference: libseccomp answers ENOSYS, not EPERM, for open_tree_attr (unknown to it) and READ_IMPLIES_EXEC",
		"NoNestedNamespacesOrSharedCounters":        "known gap: runc cannot set user.max_*_namespaces in the sandbox's user namespace (seccomp still refuses every namespace flag)",
		"ExhaustionInOneSandboxLeavesOthersWorking": "known gap: runc (root) owns the user namespace, so inotify instances are charged to host root's count",
		"Terminal": "known gap: the terminal is the process's stdio but not its controlling terminal (runc --tty with a console socket is not built)",
	},
	RuntimeRunsc: {
		"WriteFileThenExec":                     "gVisor 2022-12 answers EINVAL to coreutils' statx",
		"TimeoutKillsGroup":                     "known gap: under runsc a stop reaches the exec's process, not its group (runsc kill --pid)",
		"Terminal":                              "known gap: no terminal under runsc yet",
		"ConcurrentProcesses":                   "known gap: a second concurrent runsc exec sometimes fails (status 128)",
		"PausedProcessMakesNoProgress":          "known gap: an exec started around a runsc pause sometimes fails (status 128)",
		"PauseResume":                           "known gap: under load, a loop running across a runsc pause sometimes makes no progress after the resume (its execs fail as above; a fresh-clone CI run timed out so)",
		"ReadsStayInsideTheView":                "known gap: gVisor lets the workload read the init's /proc/1/environ (it holds only HOME=/nonexistent)",
		"ForkBombIsContained":                   "known gap: the pids limit holds the whole sandbox, gVisor's Sentry and gofer threads included, so 32 leaves python3 no room to start",
		"MemoryBombIsOOMKilled":                 "known difference: gVisor's kernel fails the allocation (MemoryError, exit 1) instead of an OOM kill",
		"ForeignABISyscallKillsTheProcess":      "by design: the i386 and x32 syscalls reach gVisor's kernel, which refuses them (no host syscall table is reached), not a kill",
		"SyscallAllowList":                      "by design: gVisor's kernel answers the workload's syscalls; linux_sandbox's allow-list is not loaded into it",
		"NoNestedNamespacesOrSharedCounters":    "by design: namespaces inside gVisor are gVisor's own kernel's; the host's user.max_*_namespaces do not apply",
		"ConcurrentSandboxesGetTheirOwnHostIDs": "by design: the workload is no host process; gVisor's uid_map is its own (host_ids is not listed enforced under runsc)",
	},
}

const RuntimeRunc, RuntimeRunsc = oci.RuntimeRunc, oci.RuntimeRunsc

// factory builds the backend for runtime rt, or skips with the reason
// it cannot run here (or that the test is one it differs from).
func factory(rt string) backendtest.Factory {
	return func(t *testing.T) backend.Backend {
		t.Helper()
		name := t.Name()[strings.LastIndexByte(t.Name(), '/')+1:]
		for _, m := range []map[string]string{differs[""], differs[rt]} {
			if why, ok := m[name]; ok {
				t.Skipf("%s on %s: %s", name, rt, why)
			}
		}
		b := newBackend(t, rt)
		return imaged{Backend: b, rt: rt, img: testImage(t)}
	}
}

func newBackend(t testing.TB, rt string) *oci.Backend {
	t.Helper()
	b, err := backend.New(oci.Kind, backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Available(context.Background()); err != nil {
		t.Skipf("oci is unavailable here: %v", err)
	}
	if err := oci.RuntimeAvailable(context.Background(), rt); err != nil {
		t.Skipf("%s is unavailable here: %v", rt, err)
	}
	return b.(*oci.Backend)
}

func TestConformance(t *testing.T) {
	for _, rt := range oci.Runtimes {
		t.Run(rt, func(t *testing.T) { backendtest.Run(t, factory(rt)) })
	}
}

func TestLifecycle(t *testing.T) {
	for _, rt := range oci.Runtimes {
		t.Run(rt, func(t *testing.T) { backendtest.Lifecycle(t, factory(rt)) })
	}
}

func TestAdversarial(t *testing.T) {
	for _, rt := range oci.Runtimes {
		t.Run(rt, func(t *testing.T) { backendtest.Adversarial(t, factory(rt)) })
	}
}

// exec runs argv in sb and returns its stdout, failing on a non-zero exit.
func execOut(t *testing.T, sb backend.Sandbox, argv ...string) string {
	t.Helper()
	var out, errb backendtest.Buffer
	o, err := sb.Exec(context.Background(), backend.Exec{Argv: argv, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &out, Stderr: &errb})
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("Exec(%q) = %+v, %v; stderr %q", argv, o, err, errb.String())
	}
	return out.String()
}

// TestRootInside: the workload is uid 0 of its user namespace (runc: a
// host id of the sandbox's own range); what it writes to /etc is seen by
// its next command and by no other sandbox, and the image is unchanged.
func TestRootInside(t *testing.T) {
	for _, rt := range oci.Runtimes {
		t.Run(rt, func(t *testing.T) {
			b := factory(rt)(t).(imaged)
			img := b.img
			before := backendtest.TreeDigest(t, filepath.Join(img.RootFS, "etc"))
			ctx := context.Background()
			spec, _, _ := backendtest.Spec(t, "/bin/true")
			one, err := b.Create(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			defer one.Delete(ctx)
			if got := strings.TrimSpace(execOut(t, one, "id", "-u")); got != "0" {
				t.Errorf("id -u = %q, want 0", got)
			}
			execOut(t, one, "/bin/sh", "-c", "echo installed > /etc/agent-runner-test && mkdir -p /usr/local/x && touch /usr/local/x/y")
			if got := execOut(t, one, "cat", "/etc/agent-runner-test"); got != "installed\n" {
				t.Errorf("the next command reads /etc/agent-runner-test = %q, want installed", got)
			}
			spec2, _, _ := backendtest.Spec(t, "/bin/true")
			two, err := b.Create(ctx, spec2)
			if err != nil {
				t.Fatal(err)
			}
			defer two.Delete(ctx)
			if got := execOut(t, two, "/bin/sh", "-c", "cat /etc/agent-runner-test 2>&1 || true"); strings.Contains(got, "installed") {
				t.Errorf("another sandbox reads the first one's /etc: %q", got)
			}
			if _, err := os.Stat(filepath.Join(img.RootFS, "etc/agent-runner-test")); err == nil {
				t.Errorf("the write reached the image's root")
			}
			if after := backendtest.TreeDigest(t, filepath.Join(img.RootFS, "etc")); after != before {
				t.Errorf("the image's /etc changed")
			}
		})
	}
}

// TestPauseStopsProgress: a counter makes no progress while the sandbox
// is paused and goes on once it is resumed.
func TestPauseStopsProgress(t *testing.T) {
	for _, rt := range oci.Runtimes {
		t.Run(rt, func(t *testing.T) {
			b := factory(rt)(t).(imaged)
			ctx := context.Background()
			spec, _, _ := backendtest.Spec(t, "/bin/true")
			sb, err := b.Create(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Delete(ctx)
			p, err := sb.Start(ctx, backend.Exec{Argv: []string{"/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > count; sleep 0.01; done"}, Env: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				t.Fatal(err)
			}
			read := func() string {
				var buf backendtest.Buffer
				if err := sb.ReadFile(ctx, "count", &buf, 64); err != nil {
					return ""
				}
				return buf.String()
			}
			waitFor(t, func() bool { return read() != "" })
			if err := sb.Pause(ctx); err != nil {
				t.Fatal(err)
			}
			frozen := read()
			time.Sleep(300 * time.Millisecond)
			if got := read(); got != frozen {
				t.Errorf("count went from %q to %q while paused", frozen, got)
			}
			if err := sb.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return read() != frozen })
			p.Signal(9)
			if o, err := p.Wait(ctx); err != nil || o.Signal != "SIGKILL" {
				t.Errorf("Wait after SIGKILL = %+v, %v", o, err)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met in 10 s")
}

// TestRefusesWithoutImage: the backend runs images only, and says so.
func TestRefusesWithoutImage(t *testing.T) {
	b, err := backend.New(oci.Kind, backend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := backendtest.Spec(t, "/bin/true")
	if _, err := b.Run(context.Background(), spec); job.CodeOf(err) != job.CodeBackendUnavail {
		t.Errorf("Run without an image: %v, want %s", err, job.CodeBackendUnavail)
	}
	spec.Image, spec.Runtime = &backend.Image{RootFS: "/nonexistent"}, "crun"
	if _, err := b.Run(context.Background(), spec); job.CodeOf(err) != job.CodeInvalidRequest {
		t.Errorf("Run with runtime crun: %v, want %s", err, job.CodeInvalidRequest)
	}
}

// TestEgressBridge: with an egress bridge a runc sandbox reaches the
// gateway's socket through 127.0.0.1:3128 inside (and the proxy
// variables point there); without one that port is closed.
func TestEgressBridge(t *testing.T) {
	b := factory(RuntimeRunc)(t).(imaged)
	sock := filepath.Join(t.TempDir(), "gw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			io.WriteString(c, "gateway saw "+line)
			c.Close()
		}
	}()
	program := `
import os, socket
try:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    s.sendall(b"CONNECT example.com:443\n")
    print(s.recv(100).decode().strip())
except OSError as e:
    print("refused", type(e).__name__)
print("proxy", os.environ.get("HTTPS_PROXY"))
`
	spec, out, errb := backendtest.Spec(t, "/usr/bin/python3", "-c", program)
	spec.Network, spec.Egress = job.NetworkAllowlist, &backend.Egress{Socket: sock}
	if o, err := b.Run(context.Background(), spec); err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v: %s", o, err, errb.String())
	}
	if got, want := out.String(), "gateway saw CONNECT example.com:443\nproxy http://127.0.0.1:3128\n"; got != want {
		t.Errorf("through the bridge: %q, want %q", got, want)
	}
	spec, out, _ = backendtest.Spec(t, "/usr/bin/python3", "-c", program)
	if _, err := b.Run(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "refused") {
		t.Errorf("without a bridge: %q, want refused", got)
	}
}
