package linuxsandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent-runner/agent-runner/backend"
	"github.com/agent-runner/agent-runner/job"
)

// denyTree is a view in miniature: bin holds a shell (sh), a hard link
// to it under another name, a link to it, and a program; lib holds no
// shell.
func denyTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/lib/x", "etc"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for _, f := range []string{"usr/bin/dash", "usr/bin/ls", "usr/lib/x/lib.so", "etc/passwd"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("#!/bin/x\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Link(filepath.Join(root, "usr/bin/dash"), filepath.Join(root, "usr/bin/innocent"))
	os.Symlink("dash", filepath.Join(root, "usr/bin/sh"))
	return root
}

// TestGrantAround: a root is granted whole where it holds no denied
// file, entry by entry along the way to one, and the denied file is
// granted under no name (its hard link neither); links are left to
// their targets.
func TestGrantAround(t *testing.T) {
	root := denyTree(t)
	at := func(p string) string { return filepath.Join(root, p) }
	d := deniedFiles([]string{"sh", "bash"}, []string{at("usr/bin")})
	if got, want := d.paths, []string{at("usr/bin/dash")}; !cmp.Equal(got, want) {
		t.Fatalf("denied paths = %q, want %q (sh followed to the real file)", got, want)
	}
	var g grants
	d.grantAround(root, &g)
	want := grants{
		dirs:   []string{at("etc"), at("usr/lib")},
		files:  []string{at("usr/bin/ls")},
		listed: []string{root, at("usr"), at("usr/bin")},
	}
	if diff := cmp.Diff(want, g, cmp.AllowUnexported(grants{})); diff != "" {
		t.Errorf("grantAround (-want +got):\n%s", diff)
	}

	g = grants{}
	d.grantAround(at("usr/lib"), &g)
	if diff := cmp.Diff(grants{dirs: []string{at("usr/lib")}}, g, cmp.AllowUnexported(grants{})); diff != "" {
		t.Errorf("a root without a shell (-want +got):\n%s", diff)
	}
}

// TestExecJudge: the judge refuses a denied file under any name, a
// script whose #! interpreter is one, and under an allow-list anything
// off it; a missing file is no denial.
func TestExecJudge(t *testing.T) {
	root := denyTree(t)
	at := func(p string) string { return filepath.Join(root, p) }
	script := at("usr/lib/x/run")
	os.WriteFile(script, []byte("#!"+at("usr/bin/sh")+" -e\necho\n"), 0o755)
	deny := execJudge{deny: deniedFiles([]string{"sh"}, []string{at("usr/bin")}).ids}
	tests := []struct {
		path, interp string
		refused      bool
	}{
		{at("usr/bin/sh"), "", true},
		{at("usr/bin/innocent"), "", true},
		{script, at("usr/bin/sh"), true},
		{at("usr/bin/ls"), "", false},
		{at("usr/bin/missing"), "", false},
	}
	for _, tt := range tests {
		interp, refused := deny.denied(tt.path)
		if interp != tt.interp || refused != tt.refused {
			t.Errorf("denied(%q) = %q, %v, want %q, %v", tt.path, interp, refused, tt.interp, tt.refused)
		}
	}
	allow := newExecJudge(initConfig{Executables: []string{at("usr/bin/ls")}})
	for path, want := range map[string]bool{at("usr/bin/ls"): false, at("etc/passwd"): true} {
		if _, refused := allow.denied(path); refused != want {
			t.Errorf("allow-list of ls: denied(%q) = %v, want %v", path, refused, want)
		}
	}
}

// TestExecRecorderCaps: the recorder keeps the first job.MaxExecDenials
// of a process group in time order and counts them all; taking a group
// leaves the others.
func TestExecRecorderCaps(t *testing.T) {
	r := newExecRecorder(execJudge{})
	t0 := time.Unix(0, 0)
	for i := range job.MaxExecDenials + 5 {
		d := groupDenial{pgid: 7}
		d.Path, d.Time = "/bin/sh", t0.Add(time.Duration(job.MaxExecDenials+5-i)*time.Second)
		r.record(d)
	}
	other := groupDenial{pgid: 9}
	other.Path = "/bin/bash"
	r.record(other)
	got, total := r.take(7)
	if len(got) != job.MaxExecDenials || total != job.MaxExecDenials+5 {
		t.Errorf("take(7) = %d denials, total %d, want %d and %d", len(got), total, job.MaxExecDenials, job.MaxExecDenials+5)
	}
	if !slices.IsSortedFunc(got, func(a, b job.ExecDenial) int { return a.Time.Compare(b.Time) }) {
		t.Errorf("take(7) is not in time order")
	}
	if got, total := r.take(-1); len(got) != 1 || total != 1 || got[0].Path != "/bin/bash" {
		t.Errorf("take(-1) after take(7) = %+v, %d, want the other group's one denial", got, total)
	}
	var none *execRecorder
	if got, total := none.take(-1); got != nil || total != 0 {
		t.Errorf("a nil recorder's take = %+v, %d", got, total)
	}
}

// TestShellDenyWithoutLandlock: a job that denies shells on a kernel
// without Landlock is refused (backend.unavailable naming shells) unless
// the operator accepts unenforced limits; one that allows shells, or a
// kernel with Landlock, runs.
func TestShellDenyWithoutLandlock(t *testing.T) {
	deny := backend.Spec{DeniedPrograms: []string{"sh"}}
	tests := []struct {
		name            string
		abi             int
		spec            backend.Spec
		allowUnenforced bool
		refused         bool
	}{
		{"no Landlock", 0, deny, false, true},
		{"no Landlock, unenforced limits allowed", 0, deny, true, false},
		{"no Landlock, shells allowed", 0, backend.Spec{}, false, false},
		{"Landlock", 1, deny, false, false},
	}
	for _, tt := range tests {
		err := shellDenyOn(tt.abi, tt.spec, tt.allowUnenforced)
		if (err != nil) != tt.refused {
			t.Errorf("%s: shellDenyOn = %v, want refused %v", tt.name, err, tt.refused)
			continue
		}
		if err != nil && (job.CodeOf(err) != job.CodeBackendUnavail || !strings.Contains(err.Error(), "allow_shell")) {
			t.Errorf("%s: error = %v (%s), want %s naming allow_shell", tt.name, err, job.CodeOf(err), job.CodeBackendUnavail)
		}
	}
}

// BenchmarkGrantAroundView prices the walk a sandbox with denied shells
// makes before its Landlock rules (on this host's own view, not counting
// the rules' syscalls): finding the shells, and splitting the toolchain
// roots around them. It reports how many rules the split makes.
func BenchmarkGrantAroundView(b *testing.B) {
	names := []string{"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "fish", "csh", "tcsh", "busybox"}
	var n int
	for b.Loop() {
		d := deniedFiles(names, denyDirs(nil))
		n = 0
		for _, r := range d.rulesAround(readDirs, DefaultToolchain) {
			n += len(r.paths)
		}
	}
	b.ReportMetric(float64(n), "rules")
}

// TestOutermost: roots are resolved, and a root below another (a merged
// /usr's /bin) is left to it, so no directory is walked twice.
func TestOutermost(t *testing.T) {
	root := denyTree(t)
	at := func(p string) string { return filepath.Join(root, p) }
	os.Symlink("usr/bin", at("bin"))
	got := outermost([]string{at("bin"), at("usr"), at("etc"), at("usr/lib"), at("missing"), at("usr")})
	if want := []string{at("etc"), at("usr")}; !cmp.Equal(got, want) {
		t.Errorf("outermost = %q, want %q", got, want)
	}
}
