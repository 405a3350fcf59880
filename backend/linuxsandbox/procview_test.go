package linuxsandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-runner/agent-runner/backend/backendtest"
)

// TestProcShowsNothingOfTheHost reads the host-wide /proc files inside a
// sandbox whose workspace is an overlay (the layers named in mountinfo's
// options): the kernel command line, boot id and disk statistics read
// empty, and mountinfo names neither the store's layers nor the job.
func TestProcShowsNothingOfTheHost(t *testing.T) {
	b := sandbox(t)
	spec, out, errb := backendtest.Spec(t, "/bin/sh", "-c",
		"for f in /proc/cmdline /proc/sys/kernel/random/boot_id /proc/diskstats /proc/kcore /proc/keys /proc/sched_debug /proc/vmstat; do printf '%s=' $f; cat $f 2>&1 | head -c 200; echo; done; echo MOUNTINFO; cat /proc/self/mountinfo")
	base := filepath.Dir(spec.Workspace.Dir)
	spec.JobID = "job_procview_secret"
	spec.Workspace.Lower = spec.Workspace.Dir
	spec.Workspace.Upper = filepath.Join(base, "job_procview_secret", "upper")
	spec.Workspace.Work = filepath.Join(base, "job_procview_secret", "work")
	for _, d := range []string{spec.Workspace.Upper, spec.Workspace.Work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec.Workspace.Dir = filepath.Join(base, "merged")
	o, err := b.Run(context.Background(), spec)
	if err != nil || o.ExitCode == nil || *o.ExitCode != 0 {
		t.Fatalf("Run: %v %+v stderr %q", err, o, errb.String())
	}
	got := out.String()
	t.Logf("inside:\n%s", got)
	for _, f := range []string{"/proc/cmdline", "/proc/sys/kernel/random/boot_id"} {
		host, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if h := strings.TrimSpace(string(host)); h != "" && strings.Contains(got, h) {
			t.Errorf("the sandbox read the host's %s (%q)", f, h)
		}
	}
	for _, f := range []string{"/proc/cmdline", "/proc/sys/kernel/random/boot_id", "/proc/diskstats", "/proc/vmstat"} {
		if !strings.Contains(got, "\n"+f+"=\n") && !strings.HasPrefix(got, f+"=\n") {
			t.Errorf("%s is not empty inside the sandbox", f)
		}
	}
	_, mountinfo, _ := strings.Cut(got, "MOUNTINFO\n")
	for _, leak := range []string{base, "job_procview_secret"} {
		if strings.Contains(mountinfo, leak) {
			t.Errorf("mountinfo inside the sandbox names %q:\n%s", leak, mountinfo)
		}
	}
}
