package linuxsandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/job"
)

// execOut runs argv in s and returns its stdout and stderr, failing t
// unless it exits 0.
func execOut(t *testing.T, s backend.Sandbox, argv ...string) string {
	t.Helper()
	out, errb := &backendtest.Buffer{}, &backendtest.Buffer{}
	o, err := s.Exec(context.Background(), backend.Exec{Argv: argv, Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, Stdout: out, Stderr: errb, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Exec(%q): %v", argv, err)
	}
	if o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("Exec(%q) = %+v\nstdout: %s\nstderr: %s", argv, o, out, errb)
	}
	return out.String()
}

func TestImageRootInside(t *testing.T) {
	b := imageSandbox(t)
	img := backendtest.DebianImage(t)
	spec, out, errb := imageSpec(t, img, "/bin/sh", "-c", `id -u; id -g; cat /etc/debian_version; echo "$IMAGE_ONLY $SHARED"; grep CapEff /proc/self/status`)
	spec.Env = append(spec.Env, "SHARED=from-job")
	o, err := b.Run(context.Background(), spec)
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v\n%s", o, err, errb)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 5 || lines[0] != "0" || lines[1] != "0" || !strings.HasPrefix(lines[2], "12") || lines[3] != "from-image from-job" {
		t.Fatalf("id -u, id -g, debian_version, env = %q, want 0, 0, 12.x, the image's env under the job's", lines)
	}
	// CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP
	// NET_BIND_SERVICE SETFCAP: nothing else.
	if got, want := strings.Fields(lines[4])[1], "00000000800005fb"; got != want {
		t.Errorf("CapEff = %s, want %s (the image root's capability set)", got, want)
	}
}

func TestImageEnvAndWorkingDir(t *testing.T) {
	b := imageSandbox(t)
	img := backendtest.DebianImage(t)
	img.WorkingDir = "/usr/share"
	spec, _, _ := imageSpec(t, img)
	s, err := b.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Delete(context.Background())
	out := &backendtest.Buffer{}
	if _, err := s.Exec(context.Background(), backend.Exec{Argv: []string{"/bin/sh", "-c", `echo "$IMAGE_ONLY $SHARED $(pwd)"`}, Env: []string{"SHARED=from-job"}, Stdout: out}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out.String()), "from-image from-job /usr/share"; got != want {
		t.Errorf("env and cwd = %q, want %q (image env under the exec's, the image's working directory)", got, want)
	}
	out = &backendtest.Buffer{}
	if _, err := s.Exec(context.Background(), backend.Exec{Argv: []string{"/bin/pwd"}, Cwd: ".", Stdout: out}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != "/workspace" {
		t.Errorf("pwd with cwd \".\" = %q, want /workspace", got)
	}
}

// buildDeb builds a small package in dir with dpkg-deb: a file under
// /usr/share and a postinst that writes /etc and chowns to other ids.
func buildDeb(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb is not installed")
	}
	pkg := filepath.Join(t.TempDir(), "artest")
	files := map[string]string{
		"DEBIAN/control":         "Package: artest\nVersion: 1.0\nArchitecture: all\nMaintainer: agent-runner <test@example.invalid>\nDescription: agent-runner image test\n",
		"DEBIAN/postinst":        "#!/bin/sh\nset -e\necho installed > /etc/artest-installed\nchown 4242:4243 /etc/artest-installed\n",
		"usr/share/artest/hello": "hello from the deb\n",
	}
	for name, body := range files {
		p := filepath.Join(pkg, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, "postinst") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, "artest.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", pkg, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, out)
	}
	return deb
}

// TestImageInstallsStayInTheSandbox: root inside installs a package from
// the workspace and writes /etc; the next exec of the same sandbox sees
// both, another sandbox on the same image sees neither, and after Delete
// the image's tree is as it was and the sandbox's layer is gone.
func TestImageInstallsStayInTheSandbox(t *testing.T) {
	b := imageSandbox(t)
	img := backendtest.DebianImage(t)
	before := ownedTreeDigest(t, img.RootFS)
	tmp := t.TempDir()
	os.Chmod(filepath.Dir(tmp), 0o755)
	os.Chmod(tmp, 0o755)
	t.Setenv("TMPDIR", tmp) // the sandbox's root layer is made here

	specA, _, _ := imageSpec(t, img)
	buildDeb(t, specA.Workspace.Dir)
	ctx := context.Background()
	a, err := b.Create(ctx, specA)
	if err != nil {
		t.Fatal(err)
	}
	specB, _, _ := imageSpec(t, img)
	other, err := b.Create(ctx, specB)
	if err != nil {
		a.Delete(ctx)
		t.Fatal(err)
	}
	execOut(t, a, "/usr/bin/dpkg", "-i", "/workspace/artest.deb")
	execOut(t, a, "/bin/sh", "-c", "echo written > /etc/marker && mkdir -p /opt/tool && echo x > /usr/local/bin/tool")
	got := execOut(t, a, "/bin/sh", "-c", "cat /usr/share/artest/hello /etc/artest-installed /etc/marker; stat -c %u:%g /etc/artest-installed; dpkg-query -W -f='${Status}' artest")
	want := "hello from the deb\ninstalled\nwritten\n4242:4243\ninstall ok installed"
	if got != want {
		t.Errorf("after dpkg -i and a write to /etc, the next exec saw %q, want %q", got, want)
	}
	seen := execOut(t, other, "/bin/sh", "-c", "ls /usr/share/artest /etc/marker /etc/artest-installed /opt/tool 2>&1; dpkg-query -W artest 2>&1; true")
	for _, p := range []string{"artest:", "hello", "written"} {
		if strings.Contains(seen, p) && !strings.Contains(seen, "No such file") && !strings.Contains(seen, "no packages found") {
			t.Errorf("another sandbox on the same image sees the first one's changes (%s):\n%s", p, seen)
		}
	}
	if n := strings.Count(seen, "No such file"); n != 4 {
		t.Errorf("another sandbox saw %d of the 4 paths missing:\n%s", n, seen)
	}
	a.Delete(ctx)
	other.Delete(ctx)
	if after := ownedTreeDigest(t, img.RootFS); after != before {
		t.Errorf("the image's root file system changed: %s -> %s", before, after)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "agent-runner-*"))
	if len(left) != 0 {
		t.Errorf("Delete left the sandbox's directories behind: %q", left)
	}
}

// rootEscapes are what root inside an image sandbox tries against the
// host: each line says DENIED unless the attack worked.
const rootEscapes = `
import ctypes, os, socket, stat
libc = ctypes.CDLL(None, use_errno=True)
def sc(name, r):
    print(name, "DENIED errno=%d" % ctypes.get_errno() if r == -1 else "WORKED %r" % r)
def py(name, f):
    try:
        print(name, "WORKED", repr(f())[:80])
    except OSError as e:
        print(name, "DENIED", type(e).__name__)
os.makedirs("/mnt/host", exist_ok=True)
sc("mount-disk", libc.mount(b"/dev/vda", b"/mnt/host", b"ext4", 0, None))
sc("mount-proc-sys", libc.mount(b"none", b"/mnt/host", b"sysfs", 0, None))
py("mknod-block", lambda: os.mknod("/tmp/disk", 0o600 | stat.S_IFBLK, os.makedev(254, 0)))
py("mknod-char-mem", lambda: os.mknod("/tmp/mem", 0o600 | stat.S_IFCHR, os.makedev(1, 1)))
sc("init_module", libc.syscall(175, b"\0" * 64, 64, b""))
sc("finit_module", libc.syscall(313, 0, b"", 0))
py("proc-1-root", lambda: os.listdir("/proc/1/root/"))
py("proc-1-environ", lambda: open("/proc/1/environ", "rb").read())
sc("ptrace-init", libc.ptrace(16, 1, 0, 0))
sc("setns-host", libc.setns(os.open("/proc/1/ns/mnt", os.O_RDONLY) if os.path.exists("/proc/1/ns/mnt") else -1, 0))
py("host-secret", lambda: open(HOST_SECRET, "rb").read())
py("sysrq", lambda: open("/proc/sysrq-trigger", "w").write("h"))
py("core-pattern", lambda: open("/proc/sys/kernel/core_pattern", "w").write("|/tmp/x"))
py("network", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
py("chroot", lambda: os.chroot("/tmp"))
sc("unshare-userns", libc.unshare(0x10000000))
with open("/workspace/suid", "w") as f:
    f.write("x")
os.chown("/workspace/suid", 0, 0)
os.chmod("/workspace/suid", 0o4755)
print("chowned", os.stat("/workspace/suid").st_uid)
`

// TestImageRootCannotEscape: root inside its namespace reaches nothing
// of the host: no disk, module, foreign /proc root, init ptrace, device
// node, host file, network; a file it chowns to its root is an
// unprivileged id of the slot on the host.
func TestImageRootCannotEscape(t *testing.T) {
	b := imageSandbox(t)
	img := backendtest.DebianImage(t)
	secret := filepath.Join(t.TempDir(), "id_rsa")
	os.WriteFile(secret, []byte("HOST-SECRET"), 0o644)
	prog := strings.Replace(rootEscapes, "HOST_SECRET", "'"+secret+"'", 1)
	spec, out, errb := imageSpec(t, img, "/usr/bin/python3", "-c", prog)
	o, err := b.Run(context.Background(), spec)
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v\nstdout: %s\nstderr: %s", o, err, out, errb)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.Contains(line, "WORKED") {
			t.Errorf("root inside escaped: %s", line)
		}
	}
	if !strings.Contains(out.String(), "chowned 0") {
		t.Errorf("root inside could not chown its own file to its root:\n%s", out)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(spec.Workspace.Dir, "suid"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid < 1_000_000 {
		t.Errorf("a file root inside chowned to 0 is host uid %d, want one of the slot's unprivileged range", st.Uid)
	}
	t.Logf("root inside:\n%s", out)
}

// TestImageRefusesWhatCannotHold: exec allow-lists and denied shells do
// not hold against root on a writable root: refused, never run without.
func TestImageRefusesWhatCannotHold(t *testing.T) {
	b := imageSandbox(t)
	img := backendtest.DebianImage(t)
	for name, mutate := range map[string]func(*backend.Spec){
		"every_process": func(s *backend.Spec) { s.Executables = []string{"/usr/bin/id"} },
		"allow_shell":   func(s *backend.Spec) { s.DeniedPrograms = []string{"sh", "bash", "dash"} },
	} {
		spec, _, _ := imageSpec(t, img, "/usr/bin/id")
		mutate(&spec)
		_, err := b.Run(context.Background(), spec)
		if job.CodeOf(err) != job.CodeBackendUnavail {
			t.Errorf("%s on an image: Run error = %v, want %s", name, err, job.CodeBackendUnavail)
		}
	}
}
