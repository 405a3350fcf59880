package linuxsandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCgroupOnThisKernel gives a real process a job cgroup on this host's
// hierarchy (v1 here and in CI, v2 in the guest of TestCgroupV2InGuest)
// and checks that the kernel holds the limits and the process, and that
// remove leaves nothing behind.
func TestCgroupOnThisKernel(t *testing.T) {
	if !cgroupsWritable() {
		t.Skipf("the runner cannot create cgroups here (uid %d, no delegation)", os.Getuid())
	}
	l, err := selfCgroups().layout()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cgroup mode %s", l.mode) // TestCgroupV2InGuest looks for "cgroup mode v2"
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-waited
	}()
	cg, err := newCgroup("kernel-test", cmd.Process.Pid, jobLimits)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("agent-runner-kernel-test-%d", cmd.Process.Pid)
	member, err := readCgroupMembership(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	got, want := map[string]string{}, map[string]string{}
	var dirs []string
	switch l.mode {
	case cgroupV1, cgroupHybrid:
		c := cg.files.(*cgroup1)
		for _, ctrl := range v1Controllers {
			got[ctrl+" member"] = filepath.Base(member[ctrl])
			want[ctrl+" member"] = name
			dirs = append(dirs, c.dirs[ctrl])
		}
		got["memory.limit_in_bytes"] = readTrim(c.dirs["memory"], "memory.limit_in_bytes")
		got["pids.max"] = readTrim(c.dirs["pids"], "pids.max")
		got["cpu.cfs_quota_us"] = readTrim(c.dirs["cpu"], "cpu.cfs_quota_us")
		want["memory.limit_in_bytes"], want["pids.max"], want["cpu.cfs_quota_us"] = "67108864", "32", "150000"
	case cgroupV2:
		c := cg.files.(*cgroup2)
		dirs = append(dirs, c.dir)
		got["member"] = filepath.Base(member[""])
		want["member"] = name
		for _, f := range []string{"memory.max", "cpu.max", "pids.max"} {
			got[f] = readTrim(c.dir, f)
		}
		want["memory.max"], want["cpu.max"], want["pids.max"] = "67108864", "150000 100000", "32"
		if _, move := l.v2Parent(); move {
			self, _ := readCgroupMembership("/proc/self/cgroup")
			got["runner"], want["runner"] = filepath.Base(self[""]), runnerLeaf
		}
	default:
		t.Fatalf("cgroups writable in mode %v", l.mode)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s cgroup (-want +got):\n%s", l.mode, diff)
	}
	// Memory charged before the move stays with the old group: only
	// the process count is certain.
	if got, want := cg.sample().Processes, int64(1); got != want {
		t.Errorf("sample().Processes = %d, want %d", got, want)
	}
	if l.mode != cgroupV2 {
		cmd.Process.Kill() // v1 has no cgroup.kill; the sandbox's pid namespace does it
	}
	cg.remove()
	select {
	case err := <-waited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the process ended with %v, want SIGKILL", err)
		}
		waited <- err
	case <-time.After(5 * time.Second):
		t.Fatal("the process outlived remove")
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still exists after remove (%v)", d, err)
		}
	}
}

func readTrim(dir, file string) string {
	b, _ := os.ReadFile(filepath.Join(dir, file))
	return strings.TrimSpace(string(b))
}
