package guestvm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFindKernelTakesTheNewestWithModules(t *testing.T) {
	got, err := FindKernel("testdata/boot", "testdata/modules")
	if err != nil {
		t.Fatal(err)
	}
	// 6.2.0-1 has no modules; 6.1.0-10 is newer than 6.1.0-9.
	want := Kernel{Image: "testdata/boot/vmlinuz-6.1.0-10-amd64", Release: "6.1.0-10-amd64", Modules: "testdata/modules/6.1.0-10-amd64"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FindKernel (-want +got):\n%s", diff)
	}
	if _, err := FindKernel("testdata/boot", t.TempDir()); err == nil {
		t.Error("FindKernel found a kernel without modules")
	}
}

func TestModulePathsLoadDependenciesFirst(t *testing.T) {
	k := Kernel{Release: "6.1.0-10-amd64", Modules: "testdata/modules/6.1.0-10-amd64"}
	for _, tc := range []struct {
		names []string
		want  []string
	}{
		{ShareModules, []string{
			"kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/virtio/virtio.ko",
			"kernel/drivers/virtio/virtio_pci_modern_dev.ko", "kernel/drivers/virtio/virtio_pci_legacy_dev.ko",
			"kernel/drivers/virtio/virtio_pci.ko",
			"kernel/net/9p/9pnet.ko", "kernel/net/9p/9pnet_virtio.ko",
			"kernel/fs/netfs/netfs.ko", "kernel/fs/fscache/fscache.ko", "kernel/fs/9p/9p.ko",
		}},
		{[]string{"ext4", "overlay"}, []string{"kernel/fs/overlayfs/overlay.ko.xz"}}, // ext4 is built in
		{[]string{"9pnet", "9pnet"}, []string{"kernel/net/9p/9pnet.ko"}},
	} {
		got, err := k.ModulePaths(tc.names...)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ModulePaths(%q) (-want +got):\n%s", tc.names, diff)
		}
	}
	if got, err := k.ModulePaths("nosuchmodule"); err == nil {
		t.Errorf("ModulePaths(nosuchmodule) = %q, want an error", got)
	}
}

func TestCompareReleases(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int // sign
	}{
		{"6.1.0-9-amd64", "6.1.0-10-amd64", -1},
		{"6.10.0-1-amd64", "6.9.0-1-amd64", 1},
		{"6.1.0-9-amd64", "6.1.0-9-amd64", 0},
		{"6.1.0-9-amd64", "6.1.0-9-cloud-amd64", -1},
	} {
		got := compareReleases(tc.a, tc.b)
		if sign(got) != tc.want {
			t.Errorf("compareReleases(%q, %q) = %d, want sign %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestParseRuns(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		want []Run
	}{
		{"two commands", "SeaBIOS\r\n\r\n" + RunMarker + " root\r\nok\r\n\r\n" + ExitMarker + " 0\r\n\n" + RunMarker + " rootless\nFAIL\n\n" + ExitMarker + " 1\n[ 3.1] reboot: Power down\n",
			[]Run{{Name: "root", Output: "ok\n\n", ExitCode: 0}, {Name: "rootless", Output: "FAIL\n\n", ExitCode: 1}}},
		{"setup failure", "boot\nguestinit: mount 9p: ENOENT\n\n" + ExitMarker + " 125\n",
			[]Run{{Name: "setup", Output: "boot\nguestinit: mount 9p: ENOENT\n\n", ExitCode: 125}}},
		{"markers only at line starts", RunMarker + " a\necho " + ExitMarker + " 0\n" + ExitMarker + " 3\n",
			[]Run{{Name: "a", Output: "echo " + ExitMarker + " 0\n", ExitCode: 3}}},
		{"cut off", RunMarker + " a\nKernel panic - not syncing\n", nil},
		{"no code", RunMarker + " a\n" + ExitMarker + " x\n", nil},
	} {
		if diff := cmp.Diff(tc.want, ParseRuns([]byte(tc.out))); diff != "" {
			t.Errorf("ParseRuns(%s) (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestMachineArgs(t *testing.T) {
	got := strings.Join(Machine{
		QEMU: "qemu-system-x86_64", Kernel: "/boot/vmlinuz", Initrd: "/tmp/i", MemoryMB: 1024, CPUs: 2,
		Shares: []Share{{Tag: "hostroot", HostDir: "/", ReadOnly: true}}, Append: "loglevel=3",
	}.Args(), " ")
	want := "-machine q35 -accel tcg -cpu max -m 1024 -smp 2 -nographic -no-reboot -nic none " +
		"-kernel /boot/vmlinuz -initrd /tmp/i -append console=ttyS0 systemd.unified_cgroup_hierarchy=1 quiet panic=-1 loglevel=3 " +
		"-virtfs local,path=/,mount_tag=hostroot,security_model=none,multidevs=remap,readonly=on"
	if got != want {
		t.Errorf("Args() = %q, want %q", got, want)
	}
}

// TestInitramfsUnpacksWithCpio checks the archive against GNU cpio, the
// reference reader of the newc format.
func TestInitramfsUnpacksWithCpio(t *testing.T) {
	cpio, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("cpio is not installed (Debian: cpio; scripts/test installs it)")
	}
	src := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho odd length\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	a := NewInitramfs(&buf)
	a.File("/bin/prog", src)
	a.Bytes("etc/conf.json", 0o644, []byte(`{"a":1}`))
	a.Symlink("/usr/bin", "../bin")
	a.Dir("/empty/nested", 0o700)
	a.Bytes("/empty/nested/f", 0o600, nil)
	a.CharDevice("/dev/console", 0o600, 5, 1) // listed, not extracted (needs mknod)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	list := exec.Command(cpio, "-t", "--quiet")
	list.Stdin = bytes.NewReader(buf.Bytes())
	out, err := list.Output()
	if err != nil {
		t.Fatalf("cpio -t: %v", err)
	}
	wantList := "bin\nbin/prog\netc\netc/conf.json\nusr\nusr/bin\nempty\nempty/nested\nempty/nested/f\ndev\ndev/console\n"
	if string(out) != wantList {
		t.Errorf("cpio -t lists\n%s\nwant\n%s", out, wantList)
	}
	dir := t.TempDir()
	extract := exec.Command(cpio, "-i", "-d", "--quiet", "--no-absolute-filenames", "--nonmatching", "dev/console")
	extract.Dir, extract.Stdin = dir, bytes.NewReader(buf.Bytes())
	if out, err := extract.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v\n%s", err, out)
	}
	got := map[string]string{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			got[rel] = "-> " + target
		case info.IsDir():
			got[rel] = info.Mode().Perm().String() + " dir"
		default:
			b, _ := os.ReadFile(p)
			got[rel] = info.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	want := map[string]string{
		"bin": "-rwxr-xr-x dir", "bin/prog": "-rwxr-x--- #!/bin/sh\necho odd length\n",
		"etc": "-rwxr-xr-x dir", "etc/conf.json": `-rw-r--r-- {"a":1}`,
		"usr": "-rwxr-xr-x dir", "usr/bin": "-> ../bin",
		"empty": "-rwxr-xr-x dir", "empty/nested": "-rwx------ dir", "empty/nested/f": "-rw------- ",
		"dev": "-rwxr-xr-x dir",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("extracted tree (-want +got):\n%s", diff)
	}
}
