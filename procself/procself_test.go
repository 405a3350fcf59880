package procself

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMounts(t *testing.T) {
	in := "22 1 0:21 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n" +
		"30 22 0:26 / /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n" +
		"40 1 8:1 /srv /with\\040space rw - ext4 /dev/sda1 rw\n" +
		"malformed line\n"
	got, err := Mounts(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Root: "/", Point: "/sys/fs/cgroup", Opts: []string{"rw", "nosuid"}, FSType: "cgroup2", Source: "cgroup2", Super: []string{"rw", "nsdelegate"}},
		{Root: "/", Point: "/sys/fs/cgroup/memory", Opts: []string{"ro", "nosuid"}, FSType: "cgroup", Source: "cgroup", Super: []string{"rw", "memory"}},
		{Root: "/srv", Point: "/with space", Opts: []string{"rw"}, FSType: "ext4", Source: "/dev/sda1", Super: []string{"rw"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Mounts (-want +got):\n%s", diff)
	}
	if !got[1].ReadOnly() || got[0].ReadOnly() {
		t.Errorf("ReadOnly = %v, %v; want false, true", got[0].ReadOnly(), got[1].ReadOnly())
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`a\040b`: "a b", `tab\011`: "tab\t", `back\134slash`: `back\slash`, `plain`: "plain", `bad\9x`: `bad\9x`, `end\04`: `end\04`} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCgroups(t *testing.T) {
	in := "12:memory:/user.slice\n11:cpu,cpuacct:/user.slice\n1:name=systemd:/init.scope\n0::/user.slice/session-1.scope\n"
	got, err := Cgroups(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"memory": "/user.slice", "cpu": "/user.slice", "cpuacct": "/user.slice", "name=systemd": "/init.scope", "": "/user.slice/session-1.scope"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Cgroups (-want +got):\n%s", diff)
	}
}
