package linuxsandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/backend/backendtest"
	"github.com/agent-runner/agent-runner/job"
)

// nodeModules makes a host node_modules the sandbox uid can reach: a
// package, and a .cache directory a host tool left there (as babel or
// eslint do), so the job writes both into a new directory and into one
// the lower layer has.
func nodeModules(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		os.Chmod(d, 0o755)
	}
	nm := filepath.Join(dir, "node_modules")
	for name, content := range map[string]string{
		"leftpad/index.js":        "module.exports = 1;\n",
		"leftpad/package.json":    `{"name":"leftpad"}` + "\n",
		".cache/babel/old.json":   "{}\n",
		".bin/placeholder-script": "#!/bin/sh\n",
	} {
		p := filepath.Join(nm, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return nm
}

// cowScript writes a new directory tree, into a directory the lower layer
// has, and over a lower file, and reads each back.
const cowScript = `set -e
mkdir -p node_modules/.cache/x
echo hello > node_modules/.cache/x/y
cat node_modules/.cache/x/y
mkdir -p node_modules/.cache/nyc && echo x > node_modules/.cache/nyc/out.json
cat node_modules/.cache/nyc/out.json
echo new > node_modules/.cache/babel/new.json
cat node_modules/.cache/babel/new.json
echo 'module.exports = 2;' >> node_modules/leftpad/index.js
tail -n 1 node_modules/leftpad/index.js
touch node_modules/top-level
rm node_modules/.bin/placeholder-script
ls node_modules/.bin | wc -l
echo id=$(id -u)
stat -c %u node_modules/.cache/x/y node_modules/leftpad/index.js | sort -u | wc -l
stat -c %a node_modules
test ! -e /.cow
`

// runCow runs script with the host directory nm bound at node_modules,
// copy-on-write when cow.
func runCow(t *testing.T, b backend.Backend, nm string, cow bool, tmpBytes int64, script string) (backend.Outcome, string, string, error) {
	t.Helper()
	spec, out, errb := backendtest.Spec(t, "/bin/sh", "-c", script)
	spec.Binds = []backend.Bind{{Source: nm, Target: "node_modules", ReadOnly: true, CopyOnWrite: cow}}
	if tmpBytes > 0 {
		spec.Limits.TmpBytes = tmpBytes
	}
	o, err := b.Run(context.Background(), spec)
	return o, out.String(), errb.String(), err
}

// skipCowRefused skips t where the backend refused a copy-on-write bind
// the way it must where the host cannot make one (an unprivileged runner
// whose kernel refuses the overlay): backend.unavailable, with a reason.
func skipCowRefused(t *testing.T, err error) {
	t.Helper()
	var je *job.Error
	if errors.As(err, &je) && je.Code == job.CodeBackendUnavail && os.Getuid() != 0 {
		t.Skipf("copy-on-write refused (fail-closed) for an unprivileged runner here: %v", err)
	}
}

// TestCopyOnWriteBind: a copy-on-write node_modules accepts writes
// anywhere in its tree within the job, and the host directory is left
// exactly as it was.
func TestCopyOnWriteBind(t *testing.T) {
	b := sandboxWith(t, suiteConfig())
	nm := nodeModules(t)
	before := backendtest.TreeDigest(t, nm)
	o, out, errs, err := runCow(t, b, nm, true, 0, cowScript)
	skipCowRefused(t, err)
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("copy-on-write job: %+v %v\nstdout %s\nstderr %s", o, err, out, errs)
	}
	want := "hello\nx\nnew\nmodule.exports = 2;\n0\nid=" + map[bool]string{true: "1000", false: "0"}[os.Getuid() == 0] + "\n1\n755\n"
	if out != want {
		t.Errorf("stdout = %q, want %q (stderr %q)", out, want, errs)
	}
	if after := backendtest.TreeDigest(t, nm); after != before {
		t.Errorf("the host's node_modules changed: digest %s, was %s", after, before)
	}
	for _, p := range []string{".cache/x", ".cache/nyc", ".cache/babel/new.json", "top-level"} {
		if _, err := os.Lstat(filepath.Join(nm, p)); err == nil {
			t.Errorf("the job's %s reached the host", p)
		}
	}
	// The writes went with the sandbox: a second job sees the host's
	// tree again.
	o, out, errs, err = runCow(t, b, nm, true, 0, "ls -a node_modules node_modules/.cache; cat node_modules/leftpad/index.js")
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("second job: %+v %v %s", o, err, errs)
	}
	if want := "node_modules:\n.\n..\n.bin\n.cache\nleftpad\n\nnode_modules/.cache:\n.\n..\nbabel\nmodule.exports = 1;\n"; out != want {
		t.Errorf("second job sees %q, want the host's tree %q", out, want)
	}
}

// TestCopyOnWriteBesideOtherBinds: two copy-on-write binds share the
// tmpfs, each keeps its own layers, and a writable bind between them (a
// root runner's other mount on the layer socket) still works.
func TestCopyOnWriteBesideOtherBinds(t *testing.T) {
	b := sandboxWith(t, suiteConfig())
	nm, venv, cache := nodeModules(t), nodeModules(t), t.TempDir()
	os.Chmod(cache, 0o755)
	spec, out, errb := backendtest.Spec(t, "/bin/sh", "-c", `set -e
echo a > node_modules/.cache/a
echo b > .venv/.cache/b
echo c > /cache/c
ls node_modules/.cache .venv/.cache | tr '
' ' '
`)
	spec.Binds = []backend.Bind{
		{Source: nm, Target: "node_modules", ReadOnly: true, CopyOnWrite: true},
		{Source: cache, Target: "/cache"},
		{Source: venv, Target: ".venv", ReadOnly: true, CopyOnWrite: true},
	}
	o, err := b.Run(context.Background(), spec)
	skipCowRefused(t, err)
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("job: %+v %v %s", o, err, errb.String())
	}
	if want := ".venv/.cache: b babel  node_modules/.cache: a babel "; out.String() != want {
		t.Errorf("stdout = %q, want %q", out.String(), want)
	}
	if got, err := os.ReadFile(filepath.Join(cache, "c")); err != nil || string(got) != "c\n" {
		t.Errorf("the writable bind: %q %v", got, err)
	}
}

// TestReadOnlyBindStaysReadOnly: without CopyOnWrite the same write fails
// with EROFS, as before the mode existed.
func TestReadOnlyBindStaysReadOnly(t *testing.T) {
	b := sandboxWith(t, suiteConfig())
	nm := nodeModules(t)
	before := backendtest.TreeDigest(t, nm)
	o, out, errs, err := runCow(t, b, nm, false, 0, "exec 2>&1; mkdir -p node_modules/.cache/nyc; echo x > node_modules/top; echo done")
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("read-only job: %+v %v %s", o, err, errs)
	}
	if strings.Count(out, "Read-only file system") != 2 {
		t.Errorf("writes into a read-only bind: %q, want EROFS twice", out)
	}
	if after := backendtest.TreeDigest(t, nm); after != before {
		t.Error("the host's node_modules changed")
	}
}

// TestCopyOnWriteCapped: the copy-on-write layer is a tmpfs of the job's
// tmp size; writing past it fails with ENOSPC inside the job.
func TestCopyOnWriteCapped(t *testing.T) {
	b := sandboxWith(t, suiteConfig())
	nm := nodeModules(t)
	o, out, errs, err := runCow(t, b, nm, true, 2<<20,
		"dd if=/dev/zero of=node_modules/.cache/big bs=1M count=4 2>&1; echo rc=$?")
	skipCowRefused(t, err)
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("job: %+v %v %s", o, err, errs)
	}
	if !strings.Contains(out, "No space left on device") || strings.Contains(out, "rc=0") {
		t.Errorf("writing 4 MiB into a 2 MiB copy-on-write layer: %q, want ENOSPC", out)
	}
	if _, err := os.Lstat(filepath.Join(nm, ".cache", "big")); err == nil {
		t.Error("the write reached the host")
	}
}

// TestCopyOnWriteRefusedFailsClosed: a host directory on a filesystem
// the copy-on-write mount cannot be made of (procfs: a root runner cannot
// idmap it, overlayfs refuses it as a lower layer in the init of an
// unprivileged one) is refused with backend.unavailable and its reason;
// the job never runs, and certainly not with the directory bound plainly
// read-only.
func TestCopyOnWriteRefusedFailsClosed(t *testing.T) {
	b := sandboxWith(t, suiteConfig())
	o, out, errs, err := runCow(t, b, "/proc/sys", true, 0, "echo RAN")
	var je *job.Error
	if !errors.As(err, &je) || je.Code != job.CodeBackendUnavail || !strings.Contains(je.Message, "copy-on-write") || je.Details["reason"] == nil {
		t.Fatalf("copy-on-write bind of procfs: %+v %v (stdout %q stderr %q), want backend.unavailable with a reason", o, err, out, errs)
	}
	if strings.Contains(out, "RAN") {
		t.Error("the job ran")
	}
	t.Logf("refused: %v", err)
}

// TestCopyOnWriteUnprivileged re-runs the copy-on-write tests as nobody
// (an unprivileged runner): each passes or is refused with
// backend.unavailable (skipCowRefused), never run read-only.
func TestCopyOnWriteUnprivileged(t *testing.T) {
	out := runUnprivileged(t, "^(TestCopyOnWriteBind|TestCopyOnWriteBesideOtherBinds|TestReadOnlyBindStaysReadOnly|TestCopyOnWriteCapped|TestCopyOnWriteRefusedFailsClosed)$")
	if !strings.Contains(out, "--- PASS: TestReadOnlyBindStaysReadOnly") || !strings.Contains(out, "--- PASS: TestCopyOnWriteRefusedFailsClosed") {
		t.Fatalf("unprivileged run did not pass:\n%s", out)
	}
	t.Logf("unprivileged run:\n%s", out)
}
